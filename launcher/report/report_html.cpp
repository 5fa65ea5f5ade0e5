// DLH — the run report page (see report_html.hpp).
#include "launcher/report/report_html.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <tuple>

#include "common/energy.hpp"
#include "common/html_page.hpp"
#include "common/svg_chart.hpp"
#include "launcher/report/headline.hpp"
#include "launcher/report/report_results.hpp"

namespace dlh::report {
namespace {

using svg::Chart;
using svg::Rule;
using svg::Series;
using svg::Style;

constexpr double kNan = __builtin_nan("");

// Averages runs of consecutive points so that a long run plots `max_points` per series:
// a polyline of 100,000 steps is no clearer than one of 1,000, and it is 100 times heavier.
Series Thin(Series s, size_t max_points) {
  const size_t n = std::min(s.x.size(), s.y.size());
  if (n <= max_points || max_points == 0) return s;
  const size_t group = (n + max_points - 1) / max_points;
  std::vector<double> x, y;
  for (size_t i = 0; i < n; i += group) {
    double sx = 0, sy = 0;
    size_t m = 0;
    for (size_t j = i; j < std::min(n, i + group); ++j)
      if (std::isfinite(s.x[j]) && std::isfinite(s.y[j])) sx += s.x[j], sy += s.y[j], ++m;
    if (m > 0) x.push_back(sx / double(m)), y.push_back(sy / double(m));
  }
  s.x = std::move(x), s.y = std::move(y);
  s.labels.clear();
  return s;
}

// A chart with data, or one line saying what has not been logged yet: an empty frame
// tells a reader nothing, and the browser test takes one for a broken chart.
void Add(const Chart& chart, HtmlPage* page) {
  for (const Series& s : chart.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) {
        page->raw(svg::Render(chart));
        return;
      }
  page->paragraph(chart.title + ": nothing logged yet.");
}

// The first wall-clock time of the run (the origin of every time axis), or 0.
double Origin(const RunData& run) {
  double t0 = 0;
  for (const StepRecord& s : run.steps)
    if (s.t > 0 && (t0 == 0 || s.t < t0)) t0 = s.t;
  for (const EventRecord& e : run.events)
    if (e.t > 0 && (t0 == 0 || e.t < t0)) t0 = e.t;
  return t0;
}

// The unit of a time axis over the whole run: seconds, minutes or hours, whichever keeps
// its numbers between about 1 and 100.
struct TimeUnit {
  double seconds;
  const char* label;
};
TimeUnit TimeUnitOf(const RunData& run, double t0) {
  double last = t0;
  for (const StepRecord& s : run.steps) last = std::max(last, s.t);
  for (const EventRecord& e : run.events) last = std::max(last, e.t);
  const double span = last - t0;
  if (span < 180) return {1, "seconds since the run started"};
  if (span < 3 * 3600) return {60, "minutes since the run started"};
  return {3600, "hours since the run started"};
}

// A damaged record's "t" may be any number: one past the year 9999 (or NaN) is no clock time,
// and converting it to time_t would overflow.
std::string Clock(double unix_s) {
  constexpr double kYear10000 = 253402300800.0;
  if (!(unix_s > 0 && unix_s < kYear10000)) return "n/a";
  const std::time_t t = std::time_t(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::string AttemptName(int attempt) { return "attempt " + std::to_string(attempt + 1); }

// One series per attempt of y(step): a resumed attempt redoes the steps after its
// checkpoint, and its own line shows where it took over.
std::vector<Series> PerAttempt(const RunData& run, double (*y)(const StepRecord&),
                               size_t max_points) {
  std::map<int, Series> by;
  for (const StepRecord& s : run.steps) {
    Series& series = by[s.attempt];
    series.x.push_back(double(s.step));
    series.y.push_back(y(s));
  }
  std::vector<Series> out;
  for (auto& [attempt, s] : by) {
    s.name = by.size() > 1 ? AttemptName(attempt) : "";
    out.push_back(Thin(std::move(s), max_points));
  }
  return out;
}

// Resumes and signals as vertical rules over a step axis.
std::vector<Rule> StepRules(const RunData& run) {
  std::vector<Rule> rules;
  for (const EventRecord& e : run.events) {
    if (e.step < 0) continue;
    if (e.event == "start" && e.data.contains("resumed_from") && e.data["resumed_from"].is_string())
      rules.push_back({double(e.step), "resumed", "#2ca02c"});
    else if (e.event == "signal")
      rules.push_back({double(e.step), TextField(e.data, "signal", "signal"), "#d62728"});
  }
  return rules;
}

void Training(const RunData& run, const ReportOptions& o, HtmlPage* page) {
  page->heading("Training");
  Chart loss{"Training loss", "step", "loss (global batch)"};
  loss.series = PerAttempt(
      run, [](const StepRecord& s) { return s.loss; }, o.max_points);
  loss.x_rules = StepRules(run);
  Add(loss, page);

  Chart acc{"Accuracy", "step", "accuracy"};
  acc.series = PerAttempt(
      run, [](const StepRecord& s) { return s.accuracy; }, o.max_points);
  for (Series& s : acc.series) s.name = s.name.empty() ? "training (batch)" : s.name + " training";
  Series test{"test (after each epoch)"};
  test.style = Style::Points;
  test.color = "#000";
  for (const EventRecord* e : run.events_named("eval")) {
    if (e->step < 0 || !e->data.contains("test_accuracy") || !e->data["test_accuracy"].is_number())
      continue;
    test.x.push_back(double(e->step));
    test.y.push_back(e->data["test_accuracy"].get<double>());
    test.labels.push_back("epoch " + std::to_string(IntField(e->data, "epoch", 0)) +
                          ": test accuracy " + svg::Number(100 * test.y.back()) + "%, loss " +
                          svg::Number(NumberField(e->data, "test_loss", kNan)));
  }
  if (!test.x.empty()) acc.series.push_back(test);
  acc.y_min = 0, acc.y_max = 1;
  acc.x_rules = StepRules(run);
  Add(acc, page);
  if (test.x.empty())
    page->paragraph(run.summary.is_object() && run.summary.contains("program")
                        ? "No evaluation logged (a program reports one with "
                          "dlh.evaluation(test_accuracy=...))."
                        : "No evaluation logged yet (one follows every epoch unless --no-eval).");
}

void Speed(const RunData& run, const ReportOptions& o, HtmlPage* page) {
  page->heading("Speed");
  const double t0 = Origin(run);
  const TimeUnit unit = TimeUnitOf(run, t0);
  Chart rate{"Samples per second", t0 > 0 ? unit.label : "step", "samples/s"};
  rate.series = PerAttempt(
      run, [](const StepRecord& s) { return s.samples_per_s; }, o.max_points);
  if (t0 > 0) {  // on the wall clock: gaps are the time between attempts
    std::map<int, Series> by;
    for (const StepRecord& s : run.steps) {
      if (!(s.t > 0)) continue;
      by[s.attempt].x.push_back((s.t - t0) / unit.seconds);
      by[s.attempt].y.push_back(s.samples_per_s);
    }
    rate.series.clear();
    for (auto& [attempt, s] : by) {
      s.name = by.size() > 1 ? AttemptName(attempt) : "";
      rate.series.push_back(Thin(std::move(s), o.max_points));
    }
  }
  rate.y_min = 0;
  Add(rate, page);

  Chart parts{"Where a step's time goes (rank 0)", "step", "seconds per step"};
  const std::pair<const char*, double StepRecord::*> phases[] = {
      {"total", &StepRecord::total_s},
      {"compute (forward + backward)", &StepRecord::compute_s},
      {"allreduce (blocked)", &StepRecord::allreduce_s},
      {"data wait", &StepRecord::data_s},
      {"checkpoint", &StepRecord::checkpoint_s}};
  for (const auto& [name, field] : phases) {
    Series s{name};
    for (const StepRecord& r : run.steps) {
      s.x.push_back(double(r.step));
      s.y.push_back(r.*field);
    }
    std::vector<size_t> order(s.x.size());  // by step: attempts overlap after a resume
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    Series sorted{name};
    for (size_t i : order) sorted.x.push_back(s.x[i]), sorted.y.push_back(s.y[i]);
    parts.series.push_back(Thin(std::move(sorted), o.max_points / 2));
  }
  parts.y_min = 0;
  Add(parts, page);
  page->paragraph(
      "Rank 0's seconds per step: compute is forward and backward, allreduce the time blocked "
      "waiting for the gradient sums (communication hidden behind backward is not counted), data "
      "the wait for the loader's next batch, checkpoint the time the step was held for a snapshot. "
      "Long runs are averaged into at most " +
      std::to_string(o.max_points / 2) + " points per line.");
}

void Ranks(const RunData& run, HtmlPage* page) {
  page->heading("Ranks");
  const nlohmann::json& s = run.summary;
  bool drawn = false;
  if (s.is_object() && s.contains("rank_step_seconds") && s["rank_step_seconds"].is_object()) {
    const nlohmann::json& r = s["rank_step_seconds"];
    Chart bal{"Each rank's mean step (last attempt)", "rank", "seconds per step"};
    const std::pair<const char*, const char*> kinds[] = {
        {"compute", "compute (forward + backward)"}, {"allreduce", "blocked in the allreduce"}};
    for (const auto& [key, name] : kinds) {
      if (!r.contains(key) || !r[key].is_array()) continue;
      Series b{name};
      b.style = Style::Bars;
      for (size_t i = 0; i < r[key].size(); ++i)
        if (r[key][i].is_number()) b.x.push_back(double(i)), b.y.push_back(r[key][i].get<double>());
      bal.series.push_back(b);
    }
    size_t ranks = 0;
    for (const Series& b : bal.series) ranks = std::max(ranks, b.x.size());
    for (size_t i = 0; i < ranks; ++i) bal.x_categories.push_back(std::to_string(i));
    if (ranks > 0) {
      Add(bal, page);
      drawn = true;
      page->paragraph(
          "A rank that computes faster waits longer in the allreduce for the slowest "
          "one: equal bars of compute mean a balanced split.");
    }
  }
  const std::vector<const EventRecord*> balances = run.events_named("balance");
  if (!balances.empty()) {
    Chart imb{"Imbalance at each change of split", "step", "imbalance"};
    Series b{"imbalance"};
    b.style = Style::Points;
    for (const EventRecord* e : balances)
      if (e->data.contains("imbalance") && e->data["imbalance"].is_number())
        b.x.push_back(double(e->step)), b.y.push_back(e->data["imbalance"].get<double>());
    imb.series.push_back(b);
    Add(imb, page);
    drawn = true;
  }
  if (!run.heartbeats.empty()) {
    std::vector<std::vector<std::string>> rows = {{"rank", "host", "step", "heartbeat", "waiting"}};
    for (const Heartbeat& h : run.heartbeats)
      rows.push_back({std::to_string(h.rank), h.host, std::to_string(h.step), Clock(h.time),
                      h.waiting_in.empty()
                          ? (h.finished ? "finished" : "")
                          : h.waiting_in + " for " + svg::Number(h.waiting_s) + " s"});
    page->table(rows);
    drawn = true;
  }
  // A program's run: what the launcher measured of each rank's process, whatever the program
  // reported of its steps.
  const auto process = s.is_object() ? s.find("rank_process") : s.end();
  if (s.is_object() && process != s.end() && process->is_object()) {
    const nlohmann::json& busy = process->value("cpu_cores_busy", nlohmann::json());
    const nlohmann::json& rss = process->value("peak_rss_mib", nlohmann::json());
    auto cell = [](const nlohmann::json& list, size_t i) {
      return list.is_array() && i < list.size() && list[i].is_number()
                 ? svg::Number(list[i].get<double>())
                 : std::string("-");
    };
    const size_t ranks =
        std::max(busy.is_array() ? busy.size() : 0, rss.is_array() ? rss.size() : 0);
    if (ranks > 0) {
      std::vector<std::vector<std::string>> rows = {{"rank", "CPU cores busy", "peak memory, MiB"}};
      for (size_t i = 0; i < ranks; ++i)
        rows.push_back({std::to_string(i), cell(busy, i), cell(rss, i)});
      page->table(rows);
      drawn = true;
    }
  }
  if (!drawn)
    page->paragraph(s.is_object() ? "summary.json holds no per-rank figures (a program reports its "
                                    "step's parts with dlh.step(compute=..., allreduce=...))."
                                  : "No per-rank figures yet (summary.json is written when a run "
                                    "ends).");
}

// The run on the wall clock: the step reached over time, one line per attempt; the
// checkpoints as dots; resumes, signals and ends as rules.
void Timeline(const RunData& run, const ReportOptions& o, HtmlPage* page) {
  page->heading("Timeline");
  const double t0 = Origin(run);
  if (t0 == 0) {
    page->paragraph(
        "This run's records carry no wall-clock time (written by an older dlh-launch).");
    return;
  }
  Chart tl{"Steps over time: attempts, checkpoints, signals, resumes", "", "step"};
  const TimeUnit unit = TimeUnitOf(run, t0);
  tl.x_label = unit.label;
  std::map<int, Series> by;
  for (const StepRecord& s : run.steps)
    if (s.t > 0)
      by[s.attempt].x.push_back((s.t - t0) / unit.seconds),
          by[s.attempt].y.push_back(double(s.step));
  for (auto& [attempt, s] : by) {
    s.name = AttemptName(attempt);
    tl.series.push_back(Thin(std::move(s), o.max_points));
  }
  Series ckpt{"checkpoint"};
  ckpt.style = Style::Points;
  ckpt.color = "#444";
  std::vector<std::vector<std::string>> rows = {{"time", "event", "step", "details"}};
  for (const EventRecord& e : run.events) {
    const double m = e.t > 0 ? (e.t - t0) / unit.seconds : kNan;
    std::string details;
    if (e.event == "checkpoint") {
      ckpt.x.push_back(m), ckpt.y.push_back(double(e.step));
      ckpt.labels.push_back("checkpoint at step " + std::to_string(e.step) + ", " +
                            svg::Number(NumberField(e.data, "write_s", kNan)) + " s to write");
      continue;  // one row per checkpoint would bury the rest: they have a section below
    }
    if (e.event == "eval") continue;
    if (e.event == "start") {
      const bool resumed = e.data.contains("resumed_from") && e.data["resumed_from"].is_string();
      details = resumed ? "resumed from " + e.data["resumed_from"].get<std::string>() : "started";
      if (e.data.contains("world_size")) details += ", " + e.data["world_size"].dump() + " ranks";
      tl.x_rules.push_back({m, resumed ? "resumed" : "start", "#2ca02c"});
    } else if (e.event == "signal") {
      details =
          TextField(e.data, "signal", "?") + ", checkpoint " + TextField(e.data, "checkpoint", "?");
      tl.x_rules.push_back({m, TextField(e.data, "signal", "signal"), "#d62728"});
    } else if (e.event == "end") {
      details = FlagField(e.data, "finished", false) ? "finished" : "stopped";
      if (e.data.contains("stop_signal") && e.data["stop_signal"].is_string())
        details += " by " + e.data["stop_signal"].get<std::string>();
      tl.x_rules.push_back({m, details, "#555"});
    } else if (e.event == "balance") {
      details =
          "new split " + (e.data.contains("rank_batches") ? e.data["rank_batches"].dump() : "?");
    } else {
      details = e.data.dump().substr(0, 160);
    }
    rows.push_back({Clock(e.t), e.event, e.step >= 0 ? std::to_string(e.step) : "", details});
  }
  if (!ckpt.x.empty()) tl.series.push_back(ckpt);
  Add(tl, page);
  if (rows.size() > 1) {
    if (rows.size() > 200) {  // keep the first and the last events
      rows.erase(rows.begin() + 101, rows.end() - 99);
      rows.insert(rows.begin() + 101, {"...", "", "", "rows left out"});
    }
    page->table(rows);
  }
}

void Checkpoints(const RunData& run, HtmlPage* page) {
  page->heading("Checkpoints");
  const std::vector<const EventRecord*> written = run.events_named("checkpoint");
  if (written.empty()) {
    page->paragraph("No checkpoint logged yet.");
    return;
  }
  Chart c{"Checkpoint write time", "step", "seconds to write"};
  Series bg{"in the background"}, sync{"synchronous"};
  bg.style = sync.style = Style::Points;
  double bytes = 0, seconds = 0;
  for (const EventRecord* e : written) {
    Series& s = FlagField(e->data, "background", false) ? bg : sync;
    s.x.push_back(double(e->step));
    s.y.push_back(NumberField(e->data, "write_s", kNan));
    bytes = NumberField(e->data, "bytes", 0.0);
    seconds += NumberField(e->data, "write_s", 0.0);
  }
  for (Series* s : {&bg, &sync})
    if (!s->x.empty()) c.series.push_back(*s);
  c.y_min = 0;
  Add(c, page);
  page->facts(
      {{"checkpoints written", std::to_string(written.size())},
       {"size", svg::Number(bytes / 1e6) + " MB"},
       {"mean write",
        svg::Number(seconds / double(written.size())) + " s" +
            (seconds > 0
                 ? " (" + svg::Number(bytes / 1e6 * double(written.size()) / seconds) + " MB/s)"
                 : "")},
       {"on disk now", run.checkpoints.empty()
                           ? "none"
                           : run.checkpoints.front() + " ... " + run.checkpoints.back()}});
}

// The plan the estimator chose (DLH_PLAN, logged at the start) and its prediction
// against the measured phases (summary.json).
void PlanAgainstRun(const RunData& run, HtmlPage* page) {
  page->heading("The plan against what happened");
  nlohmann::json plan;
  for (const EventRecord* e : run.events_named("start"))
    if (e->data.contains("plan") && e->data["plan"].is_object()) plan = e->data["plan"];
  const nlohmann::json& s = run.summary;
  const bool measured = s.is_object() && s.contains("prediction") && s.contains("measured");
  if (plan.is_null() && !measured) {
    page->paragraph(
        "This run had no plan (DLH_PLAN or --plan): it was not placed by the estimator.");
    return;
  }
  if (plan.is_object()) {
    std::vector<std::pair<std::string, std::string>> rows;
    if (plan.contains("allocation") && plan["allocation"].is_object()) {
      const nlohmann::json& a = plan["allocation"];
      std::string parts;
      const nlohmann::json parts_json =
          a.contains("parts") && a["parts"].is_array() ? a["parts"] : nlohmann::json::array();
      for (const nlohmann::json& p : parts_json)
        parts += (parts.empty() ? "" : " + ") + std::to_string(IntField(p, "nodes", 0)) +
                 " node(s) x " + std::to_string(IntField(p, "gpus_per_node", 0)) + " " +
                 TextField(p, "gpu", "?");
      rows.emplace_back("allocation",
                        parts + " (" + std::to_string(IntField(a, "gpus", 0)) + " GPUs)");
    }
    for (const char* key : {"objective", "time_limit", "global_batch", "lr", "why"})
      if (plan.contains(key))
        rows.emplace_back(key,
                          plan[key].is_string() ? plan[key].get<std::string>() : plan[key].dump());
    if (plan.contains("deadline_s") && plan["deadline_s"].is_number())
      rows.emplace_back("deadline", Duration(plan["deadline_s"].get<double>()));
    if (plan.contains("predicted") && plan["predicted"].is_object()) {
      const nlohmann::json& p = plan["predicted"];
      rows.emplace_back("predicted", Duration(NumberField(p, "total_s", kNan)) + ", " +
                                         svg::Number(NumberField(p, "energy_kwh", kNan)) +
                                         " kWh, " + svg::Number(NumberField(p, "gpu_hours", kNan)) +
                                         " GPU hours");
    }
    page->facts(rows);
  }
  if (!measured) {
    page->paragraph("The measured side comes with summary.json, when the run ends.");
    return;
  }
  const nlohmann::json& pred = s["prediction"];
  const nlohmann::json& meas = s["measured"];
  Chart c{"Predicted and measured time by phase", "", "seconds"};
  Series p{"predicted"}, m{"measured"};
  p.style = m.style = Style::Bars;
  p.color = "#9ecae1", m.color = "#1f77b4";
  std::vector<std::vector<std::string>> rows = {{"phase", "predicted", "measured", "error"}};
  auto add = [&](const std::string& name, double want, double got) {
    const double x = double(c.x_categories.size());
    c.x_categories.push_back(name);
    p.x.push_back(x), p.y.push_back(want);
    m.x.push_back(x), m.y.push_back(got);
    rows.push_back(
        {name, Duration(want), Duration(got),
         want > 0 && std::isfinite(got) ? svg::Number(100 * (got - want) / want) + "%" : ""});
  };
  if (pred.contains("phases") && meas.contains("phases") && pred["phases"].is_object())
    for (const char* phase : {"startup_s", "steps_s", "eval_s", "checkpoint_s"})
      if (pred["phases"].contains(phase))
        add(std::string(phase).substr(0, std::string(phase).size() - 2),
            NumberField(pred["phases"], phase, kNan), NumberField(meas["phases"], phase, kNan));
  add("total", NumberField(pred, "total_s", kNan), NumberField(meas, "total_s", kNan));
  c.series = {p, m};
  Add(c, page);
  page->table(rows);
  if (meas.contains("step_s") && pred.contains("step_s"))
    page->paragraph("Step: predicted " + svg::Number(1000 * NumberField(pred, "step_s", kNan)) +
                    " ms, measured " + svg::Number(1000 * NumberField(meas, "step_s", kNan)) +
                    " ms (without evaluations and checkpoints).");
}

// Rank 0's GPU as NVML sampled it (metrics.jsonl, at most once a second), by step. A CPU
// run, or a GPU NVML cannot read, has none: Energy() says why.
void GpuSamples(const RunData& run, const ReportOptions& o, HtmlPage* page) {
  const std::tuple<const char*, const char*, double StepRecord::*> kinds[] = {
      {"GPU power (rank 0)", "W", &StepRecord::gpu_power_w},
      {"GPU utilisation (rank 0)", "percent", &StepRecord::gpu_util},
      {"GPU memory used (rank 0)", "GiB", &StepRecord::gpu_mem_gib}};
  for (const auto& [title, unit, field] : kinds) {
    Series s{title};
    s.name.clear();
    for (const StepRecord& r : run.steps)
      if (std::isfinite(r.*field)) s.x.push_back(double(r.step)), s.y.push_back(r.*field);
    if (s.x.empty()) continue;
    Chart c{title, "step", unit};
    c.series.push_back(Thin(std::move(s), o.max_points));
    c.y_min = 0;
    c.height = 240;
    Add(c, page);
  }
}

// The run's measured energy (summary.json's "energy"), the meter's reading so far for a run
// still going, or "not measured" and why: never an estimate in place of a measurement.
void Energy(const RunData& run, HtmlPage* page) {
  const nlohmann::json& s = run.summary;
  const nlohmann::json* e =
      s.is_object() && s.contains("energy") && s["energy"].is_object() ? &s["energy"] : nullptr;
  const std::string plan =
      " The plan's predicted energy is under \"The plan against what happened\".";
  if (e && e->value("measured", false)) {
    const double total = NumberField(*e, "joules_total", kNan);
    const double per_sample = NumberField(*e, "joules_per_sample", kNan);
    const double power = NumberField(*e, "mean_power_w", kNan);
    std::vector<std::pair<std::string, std::string>> rows = {
        {"energy", (std::isfinite(total) ? DescribeJoules(total) : "?") + " (" +
                       TextField(*e, "source", "?") + "; " + TextField(*e, "scope", "?") + ")"}};
    if (std::isfinite(per_sample)) rows.push_back({"per sample", svg::Number(per_sample) + " J"});
    if (std::isfinite(power)) rows.push_back({"mean power", svg::Number(power) + " W"});
    page->facts(rows);
    if (e->contains("joules_per_rank") && (*e)["joules_per_rank"].is_array() &&
        (*e)["joules_per_rank"].size() > 1) {
      Chart c{"Each rank's energy", "rank", "J"};
      Series b{"joules", Style::Bars};
      b.name.clear();
      const nlohmann::json& per_rank = (*e)["joules_per_rank"];
      for (size_t i = 0; i < per_rank.size(); ++i) {
        c.x_categories.push_back(std::to_string(i));
        if (per_rank[i].is_number()) {  // null: the node's first rank measured for it
          b.x.push_back(double(i));
          b.y.push_back(per_rank[i].get<double>());
        }
      }
      c.series.push_back(b);
      c.height = 240;
      Add(c, page);
    }
    page->paragraph(
        "Measured over the training loop (evaluations and checkpoints included, "
        "start-up not) of the last attempt." +
        plan);
    return;
  }
  if (e) {
    page->paragraph("Energy: not measured (" + TextField(*e, "why", "no reason given") + ")." +
                    plan);
    return;
  }
  double so_far = kNan;  // no summary yet: the last reading metrics.jsonl holds
  for (const StepRecord& r : run.steps)
    if (std::isfinite(r.energy_j)) so_far = r.energy_j;
  page->paragraph(std::isfinite(so_far)
                      ? "Energy so far: " + DescribeJoules(so_far) +
                            " (rank 0's meter, from metrics.jsonl; summary.json gives every "
                            "rank's when the run ends)." +
                            plan
                      : "Energy: not measured (summary.json has none: the run has not ended, "
                        "or an older dlh-launch wrote it)." +
                            plan);
}

void Device(const RunData& run, const ReportOptions& o, HtmlPage* page) {
  page->heading("Device: utilisation, memory, power, energy");
  std::string device;
  for (const EventRecord* e : run.events_named("start"))
    device = TextField(e->data, "device", device);
  if (device.empty() && run.summary.is_object()) device = TextField(run.summary, "device", device);
  // Each rank's process (summary.json): CPU cores kept busy and peak resident memory.
  const nlohmann::json& s = run.summary;
  if (s.is_object() && s.contains("rank_process") && s["rank_process"].is_object()) {
    const nlohmann::json& p = s["rank_process"];
    const std::pair<const char*, const char*> kinds[] = {
        {"cpu_cores_busy", "CPU cores busy (CPU time / wall time)"},
        {"peak_rss_mib", "peak resident memory (MiB)"}};
    for (const auto& [key, title] : kinds) {
      if (!p.contains(key) || !p[key].is_array()) continue;
      Chart c{std::string("Each rank's process: ") + title, "rank", title};
      Series b{key, Style::Bars};
      b.name.clear();
      for (size_t i = 0; i < p[key].size(); ++i)
        if (p[key][i].is_number()) {
          b.x.push_back(double(i));
          b.y.push_back(p[key][i].get<double>());
          c.x_categories.push_back(std::to_string(i));
        }
      c.series.push_back(b);
      c.height = 240;
      Add(c, page);
    }
  }
  page->paragraph(
      "Measured for each rank's process over the last attempt (summary.json's "
      "rank_process)" +
      (device.empty() ? std::string() : "; device: " + device) + ".");
  GpuSamples(run, o, page);
  Energy(run, page);
}

}  // namespace

std::string ReportHtml(const RunData& run, const ReportOptions& o) {
  const Headline h = HeadlineOf(run, o.now);
  HtmlPage page("DLH run report: " + h.name);
  if (o.refresh_s > 0 && h.state == RunState::Running) page.refresh_every(o.refresh_s);
  page.paragraph("Run folder " + run.dir + ", as of " + Clock(o.now) + ".");
  if (h.state == RunState::Running)
    page.note("This run is still going: the figures are those logged so far" +
              std::string(o.refresh_s > 0 ? ", and this page reloads every " +
                                                std::to_string(o.refresh_s) + " s."
                                          : "."));
  for (const std::string& problem : run.problems) page.note(problem);
  // A program that writes no progress lines (one that knows nothing of DLH) leaves every
  // step chart empty: say why once rather than "nothing logged yet" as if it might come.
  if (run.steps.empty() && h.state != RunState::Running && run.summary.is_object() &&
      run.summary.contains("program"))
    page.note(
        "The program wrote no progress lines, so its steps, loss and rate are not known "
        "here: a program reports them through the dlh module (import dlh; dlh.step(len(x), "
        "loss=...)) or by writing the progress protocol to DLH_PROGRESS_FD "
        "(docs/reference/run.md). What DLH measured itself follows: the job's time "
        "against its plan, each rank's process and the energy.");
  page.facts(HeadlineRows(h));
  Training(run, o, &page);
  Results(run, &page);
  Speed(run, o, &page);
  Ranks(run, &page);
  Timeline(run, o, &page);
  Checkpoints(run, &page);
  PlanAgainstRun(run, &page);
  Device(run, o, &page);
  return page.render();
}

}  // namespace dlh::report
