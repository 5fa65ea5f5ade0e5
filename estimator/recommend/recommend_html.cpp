// DLH estimator — the recommendation page (see recommend_html.hpp).
//
// Sections, in reading order: what was asked; the chosen allocation (the facts the text
// output prints); every kept candidate on one time-energy chart against the deadline; the
// ranking; per GPU type, the step-time line the predictions rest on and where it comes
// from; the allocations left out and why.
#include "estimator/recommend/recommend_html.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <utility>
#include <vector>

#include "common/duration.hpp"
#include "common/html_page.hpp"
#include "common/svg_chart.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/observe/plan_block.hpp"
#include "estimator/recommend/profile_speeds.hpp"

namespace dlh {
namespace {

constexpr int kPageRanked = 200;
constexpr int kPageRejected = 200;
// The legend is one line above the plot: past this many mixes of two GPU types, all mixes
// share one series (each point's tooltip still names its allocation).
constexpr size_t kMixSeries = 3;
// One axis spans at least this ratio (max / min): logarithmic, so that 1 GPU and 128 GPUs
// both stay readable.
constexpr double kLogRatio = 30;

using svg::Number;

// A display unit: values are divided by `size` (seconds or joules per unit).
struct Unit {
  std::string name;
  double size = 1;
};

Unit TimeUnit(double most_s) {
  if (most_s < 120) return {"s", 1};
  if (most_s < 2 * 3600) return {"min", 60};
  return {"h", 3600};
}

Unit EnergyUnit(double most_j) {
  if (most_j < 3600) return {"J", 1};
  if (most_j < 3.6e6) return {"Wh", 3600};
  return {"kWh", 3.6e6};
}

Unit StepUnit(double most_s) {
  if (most_s < 1e-4) return {"us", 1e-6};
  if (most_s < 10) return {"ms", 1e-3};
  return {"s", 1};
}

std::string In(double value, const Unit& u) { return Number(value / u.size) + " " + u.name; }

bool WideRange(const std::vector<double>& values) {
  double lo = HUGE_VAL, hi = 0;
  for (double v : values) {
    if (!(v > 0) || !std::isfinite(v)) continue;  // a log axis skips them
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  return hi > 0 && hi / lo >= kLogRatio;
}

std::string Percent(double fraction) { return Number(fraction * 100) + "%"; }

// "a100", or "h100 + a100" for a mix.
std::string TypesOf(const Allocation& a) {
  std::string out;
  for (const Part& p : a.parts) out += (out.empty() ? "" : " + ") + p.gpu;
  return out;
}

// The chosen allocation, as the command line's caller picks it.
const Allocation& Chosen(const Recommendation& rec) {
  return rec.feasible && !rec.ranked.empty() ? rec.ranked.front() : rec.fastest;
}

// ---------------------------------------------------------------- what was asked

void Asked(const Job& job, const Cluster& cluster, const Recommendation& rec, HtmlPage* page) {
  std::string batch = job.per_gpu_batch > 0
                          ? std::to_string(job.per_gpu_batch) + " per GPU (weak scaling)"
                          : std::to_string(job.spec.batch_size) + " global";
  const std::string what = job.profile && !job.profile->program.empty()
                               ? job.spec.origin + " (profile of " + job.profile->program + ")"
                               : job.spec.origin;
  page->paragraph(what + ": " + std::to_string(job.samples) + " samples x " +
                  std::to_string(job.epochs) + " epochs, batch " + batch + ", deadline " +
                  (job.deadline_s > 0 ? HumanDuration(job.deadline_s) : std::string("none")) +
                  " (" + Percent(job.margin) + " margin), objective " +
                  ObjectiveName(job.objective) + ". Cluster " + cluster.name +
                  (cluster.origin.empty() ? "" : " (" + cluster.origin + ")") + ": " +
                  std::to_string(rec.candidates) + " allocations considered.");
  for (const std::string& w : StaleCalibrationWarnings(rec.speeds)) page->note("warning: " + w);
  if (job.profile)
    page->paragraph("Profiles: " + ProfileSourcesText(ProfileSourcesOfSpeeds(rec.speeds)) +
                    " (a type no profile measured is scaled from the measured type closest "
                    "in peaks).");
  if (job.profile)
    for (const std::string& w : ProfileWarnings(*job.profile)) page->note("warning: " + w);
  if (!rec.feasible)
    page->note("No allocation meets the " + HumanDuration(job.deadline_s) +
               " deadline: the fastest, below, needs " +
               HumanDuration(rec.fastest.total_s * (1 + job.margin)) + " with the " +
               Percent(job.margin) + " margin, missing it by " + HumanDuration(rec.miss_s) +
               " (dlh-estimate recommend exits 3).");
}

// ---------------------------------------------------------------- the chosen allocation

// "00:03:00: the band's 90% upper end (2m20s, against 1m52s predicted: the step's speed
// is known to within +12% at 90%, start-up and I/O to their own) + room (5% of it, at least
// 15 s), in whole minutes" (prediction_band.hpp).
std::string LimitText(const Job& job, const Allocation& a) {
  const TimeLimit limit = JobTimeLimit(job, a);
  const double upper = std::max(a.total_s, a.total_upper_s);
  std::string s = SlurmMinutes(limit.minutes) + ": the prediction's 90% upper end (" +
                  HumanDuration(upper) + ", against " + HumanDuration(a.total_s) +
                  " predicted: the step, start-up and I/O each with its own uncertainty) + " +
                  Number(kRoomFraction * 100) + "% of it as room (at least " +
                  Number(kMinRoomSeconds) + " s)";
  if (limit.signal_lead_s > 0)
    s += ", and with the job script's signal its lead (" + std::to_string(limit.signal_lead_s) +
         " s) + " + Number(kSignalEarlySeconds) +
         " s (Slurm may signal that much early), so that a job inside its band is never "
         "signalled";
  return s + "; in whole minutes";
}

void ChosenFacts(const Job& job, const Recommendation& rec, HtmlPage* page) {
  const Allocation& a = Chosen(rec);
  std::string types, per_node, nodes, batches, sources, power;
  int tasks_per_node = 0;
  for (const Part& p : a.parts) {
    const bool mix = a.parts.size() > 1;
    const std::string of = mix ? " (" + p.gpu + ")" : "";
    auto add = [](std::string* to, const std::string& text) {
      *to += (to->empty() ? "" : ", ") + text;
    };
    add(&types, p.gpu + " (node type " + p.node_type + ")");
    add(&per_node, std::to_string(p.gpus_per_node) + of);
    add(&nodes, std::to_string(p.nodes) + of);
    add(&batches, std::to_string(p.per_gpu_batch) + of);
    auto s = rec.speeds.find(p.gpu);
    if (s != rec.speeds.end()) add(&sources, p.gpu + ": " + s->second.source);
    if (s != rec.speeds.end() && !s->second.energy_source.empty())
      add(&power, p.gpu + ": " + s->second.energy_source);
    tasks_per_node = std::max(tasks_per_node, p.gpus_per_node);
  }
  const Unit step = StepUnit(a.step_s);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"allocation", AllocationName(a)},
      {"GPU type", types},
      {"GPUs per node", per_node},
      {"nodes", a.parts.size() > 1 ? std::to_string(a.nodes) + ": " + nodes : nodes},
      {"tasks", std::to_string(a.gpus) + " (" + std::to_string(tasks_per_node) + " per node)"},
      {"batch", "global " + std::to_string(a.global_batch) + ", per GPU " + batches},
      {"learning rate", Number(a.lr) + " (warm-up " + Number(a.warmup_epochs) +
                            (a.warmup_epochs == 1 ? " epoch)" : " epochs)")},
      {"time limit", LimitText(job, a)},
      {"predicted time",
       BandText(a.total_s, a.total_upper_s) + ": " + PhasesText(a.phases, a.steps)},
      {"predicted energy", In(a.energy_j, EnergyUnit(a.energy_j)) + " (" +
                               FormatEnergy(a.energy_j) + ")" +
                               (power.empty() ? "" : "; power " + power)},
      {"GPU-hours", Number(a.gpu_hours)},
      {"step", In(a.step_s, step) + " (compute " + In(a.compute_s, step) + " + allreduce " +
                   In(a.comm_s, step) + ")"},
      {"memory per GPU", Number(a.memory_bytes / 1e9) + " GB"},
      {"speed", sources},
      {"step time from", ChosenProvenance(rec, a)},
      {"meets the deadline", a.fits_memory && a.meets_deadline ? "yes" : "no"},
      {"why", a.why}};
  page->facts(rows);
}

// ---------------------------------------------------------------- candidates chart

std::string Tooltip(const Allocation& a, const Unit& energy) {
  return AllocationName(a) + ": " + HumanDuration(a.total_s) + ", " + In(a.energy_j, energy) +
         ", " + std::to_string(a.gpus) + " GPUs; " + a.why;
}

void AddPoint(svg::Series* s, const Allocation& a, const Unit& time, const Unit& energy) {
  s->x.push_back(a.total_s / time.size);
  s->y.push_back(a.energy_j / energy.size);
  s->labels.push_back(Tooltip(a, energy));
}

void CandidatesChart(const Job& job, const Recommendation& rec, const Unit& time,
                     const Unit& energy, HtmlPage* page) {
  svg::Chart chart;
  chart.title = "candidates: time vs energy";
  std::vector<double> xs, ys;
  auto note = [&](const Allocation& a) {
    xs.push_back(a.total_s);
    ys.push_back(a.energy_j);
  };
  for (const Allocation& a : rec.ranked) note(a);
  for (const Allocation& a : rec.rejected) note(a);
  note(Chosen(rec));
  if (job.deadline_s > 0) xs.push_back(job.deadline_s);
  chart.log_x = WideRange(xs);
  chart.log_y = WideRange(ys);
  chart.x_label = "predicted time (" + time.name + ")";
  chart.y_label = "predicted energy (" + energy.name + ")";

  // One series per GPU type or mix, in the order of the ranking (the chosen's first).
  std::set<std::string> mixes;
  for (const Allocation& a : rec.ranked)
    if (a.parts.size() > 1) mixes.insert(TypesOf(a));
  std::vector<svg::Series> series;
  for (const Allocation& a : rec.ranked) {
    const std::string name =
        a.parts.size() > 1 && mixes.size() > kMixSeries ? "mixed types" : TypesOf(a);
    auto it = std::find_if(series.begin(), series.end(),
                           [&](const svg::Series& s) { return s.name == name; });
    if (it == series.end()) {
      series.emplace_back();
      series.back().name = name;
      series.back().style = svg::Style::Points;
      it = series.end() - 1;
    }
    AddPoint(&*it, a, time, energy);
  }
  svg::Series over, memory, chosen;
  over.name = "over the deadline";
  over.color = "#b0b0b0";
  memory.name = "out of memory";
  memory.color = "#e8a0a0";
  chosen.name = "chosen";
  chosen.color = "#000000";
  chosen.radius = 6;
  for (svg::Series* s : {&over, &memory, &chosen}) s->style = svg::Style::Points;
  for (const Allocation& a : rec.rejected)
    AddPoint(a.fits_memory ? &over : &memory, a, time, energy);
  AddPoint(&chosen, Chosen(rec), time, energy);
  for (svg::Series* s : {&over, &memory, &chosen})
    if (!s->x.empty()) series.push_back(std::move(*s));
  chart.series = std::move(series);
  if (job.deadline_s > 0)
    chart.x_rules.push_back(
        {job.deadline_s / time.size, "deadline " + HumanDuration(job.deadline_s), "#d62728"});
  page->raw(svg::Render(chart));

  std::string text =
      "Each point is one allocation: its predicted wall time and energy (its tooltip names it). "
      "In colour by GPU type: the best " +
      std::to_string(rec.ranked.size()) + " allocations by " + ObjectiveName(job.objective) +
      (job.deadline_s > 0 ? " that meet the deadline" : " that fit in memory") + ".";
  size_t late = 0;
  for (const Allocation& a : rec.rejected) late += a.fits_memory;
  const size_t no_memory = rec.rejected.size() - late;
  if (!rec.rejected.empty())
    text += std::string(" In ") +
            (late > 0 && no_memory > 0 ? "grey (over the deadline) and pink (out of memory)"
             : late > 0                ? "grey"
                                       : "pink") +
            ": the best " + std::to_string(rec.rejected.size()) + " of those left out" +
            (no_memory > 0 ? " (the ones out of memory predicted as if they fit)." : ".");
  if (job.deadline_s > 0)
    text +=
        " The dashed line is the deadline: an allocation meets it when its predicted time "
        "plus the " +
        Percent(job.margin) + " margin does, so a point just left of the line may be over.";
  page->paragraph(text);
}

// ---------------------------------------------------------------- tables

void RankedTable(const Recommendation& rec, const Unit& energy, HtmlPage* page) {
  if (rec.ranked.empty()) {
    page->paragraph(
        "None: no allocation meets the deadline (the chosen one above is the fastest).");
    return;
  }
  std::vector<std::vector<std::string>> rows = {
      {"#", "allocation (nodes x GPUs per node, per-GPU batch)", "GPUs", "time",
       "energy (" + energy.name + ")", "GPU-hours", "step (ms)", "why"}};
  for (size_t i = 0; i < rec.ranked.size(); ++i) {
    const Allocation& a = rec.ranked[i];
    rows.push_back({std::to_string(i + 1) + (i == 0 ? " (chosen)" : ""), AllocationName(a),
                    std::to_string(a.gpus), HumanDuration(a.total_s),
                    Number(a.energy_j / energy.size), Number(a.gpu_hours), Number(a.step_s * 1e3),
                    a.why});
  }
  page->table(rows);
}

void RejectedTable(const Recommendation& rec, const Unit& energy, HtmlPage* page) {
  std::vector<std::vector<std::string>> rows = {
      {"allocation", "GPUs", "time", "energy (" + energy.name + ")", "why left out"}};
  for (const Allocation& a : rec.rejected)
    rows.push_back({AllocationName(a), std::to_string(a.gpus), HumanDuration(a.total_s),
                    Number(a.energy_j / energy.size), a.why});
  page->table(rows);
}

// ---------------------------------------------------------------- step time per GPU type

// Whether two models cost the same to the time model (the same row of its design matrix):
// a calibration's step of `a` is then a measurement of `b`'s line.
// Both engines' rows: the CPU's leaves fused layers out (features.hpp).
bool SameCost(const ModelFeatures& a, const ModelFeatures& b) {
  for (const bool cpu_engine : {false, true}) {
    const std::vector<double> x = TimeTerms(a, 1, cpu_engine), y = TimeTerms(b, 1, cpu_engine);
    for (size_t i = 0; i < x.size(); ++i)
      if (std::fabs(x[i] - y[i]) > 1e-9 * std::max({1.0, std::fabs(x[i]), std::fabs(y[i])}))
        return false;
  }
  return true;
}

// "share/calibration/cpu.json (cpu, AMD EPYC, 2 cores, 2026-11-23T13:46:13Z)"
std::string CalibrationName(const PageCalibration& c) {
  return c.path + " (" + c.calibration.device + ", " + c.calibration.host +
         (c.calibration.created.empty() ? "" : ", " + c.calibration.created) + ")";
}

// "That model was fitted to 76 timed steps of the calibration sweep: R2 0.99, MAPE 8.69%,
// 5-fold cross-validated MAPE 10%."
std::string FitQualityText(const PageCalibration& c) {
  const FitQuality& q = c.calibration.model.quality;
  std::string text = "That model was fitted to " + std::to_string(c.calibration.samples.size()) +
                     " timed steps of the calibration sweep";
  if (q.samples > 0) {
    text += ": R2 " + Number(q.r2) + ", MAPE " + Number(q.mape) + "%";
    if (q.folds > 0)
      text +=
          ", " + std::to_string(q.folds) + "-fold cross-validated MAPE " + Number(q.cv_mape) + "%";
  }
  return text + ".";
}

// What every type's line says after its source: how ranks sharing cores change it and its
// uncertainty (both functions below end with it).
std::string SpeedNotes(const DeviceSpeed& speed) {
  std::string text;
  if (speed.cpu_threads > 0)
    text += " Timed as a CPU process with " + std::to_string(speed.cpu_threads) +
            " threads: ranks that share a node's cores run slower than this line (by the "
            "measured ratio of the threads they get, not in proportion), and the candidates' "
            "predictions include that.";
  if (speed.log_sigma > 0)
    text += " Its uncertainty: a step runs at most " +
            Number(100 * std::expm1(kBandZ * speed.log_sigma)) +
            "% over the line with 90% confidence (sigma of ln(measured / predicted) " +
            Number(speed.log_sigma) + "), which makes the prediction band and the time limit.";
  return text;
}
// Where the line of `gpu` comes from, in one paragraph.
std::string SourceText(const std::string& gpu, const DeviceSpeed& speed, const Cluster& cluster,
                       const PageCalibration* cal, size_t measured) {
  std::string text;
  if (speed.reference.empty() && cal) {
    text = "The line is the time model of " + CalibrationName(*cal) +
           " evaluated for this model's features. " + FitQualityText(*cal) + " ";
    text += measured > 0 ? std::to_string(measured) +
                               " of those steps are of this model: the measured points."
                         : "None of those steps is of this model, so no point is measured: the "
                           "line is the model's prediction for its layers.";
  } else if (!speed.reference.empty() && cal) {
    text = "The line is " + speed.reference + "'s time model, " + CalibrationName(*cal) +
           ", evaluated for this model's features and scaled to " + gpu +
           " by the ratio of the peaks (compute terms by FLOP/s, memory terms by bandwidth, the "
           "overhead kept): " +
           speed.source + ". " + FitQualityText(*cal) + " Nothing was measured on " + gpu + ".";
  } else {
    const GpuType* g = cluster.gpu(gpu);
    text = "No calibration for " + gpu +
           " or any type of the cluster, so the line is the roofline model: per sample the "
           "larger of the training FLOPs at 40% of the fp32 peak" +
           (g ? " (" + Number(g->peak_tflops) + " TFLOP/s)" : std::string()) +
           " and the activation traffic at 60% of the memory bandwidth" +
           (g ? " (" + Number(g->memory_bandwidth_gbs) + " GB/s)" : std::string()) +
           ", plus kernel launches and optimizer passes per step. Nothing was measured; "
           "dlh-estimate calibrate measures a GPU type.";
  }
  return text + SpeedNotes(speed);
}

// The profile timed on `type`: the set's, else the job's only one.
const ProgramProfile& ProfileOn(const Job& job, const std::string& type) {
  for (const ProgramProfile& p : job.profiles)
    if (p.gpu_type == type) return p;
  return *job.profile;
}

// Where the line of `gpu` comes from when the job was planned from a profile.
std::string ProfileSourceText(const ProgramProfile& p, const std::string& gpu,
                              const DeviceSpeed& speed) {
  // "prof.json (train.py, cuda:0 (NVIDIA H100), node1, 2026-01-02T03:04:05Z)"
  std::string about;
  for (const std::string* part : {&p.program, &p.device, &p.host, &p.created})
    if (!part->empty()) about += (about.empty() ? "" : ", ") + *part;
  const std::string name = p.origin + (about.empty() ? "" : " (" + about + ")");
  std::string text;
  if (speed.reference.empty()) {
    text = "The line is fitted to the steps dlh-launch run --profile timed, " + name + ": " +
           speed.source +
           ". One batch gives a line through the origin; two or more a least-squares line "
           "of the relative error. The points are the median step times measured.";
  } else {
    text = "The line is " + speed.reference + "'s profile, " + name + ", scaled to " + gpu +
           " by the ratio of peak FLOP/s (the fixed part per step kept): " + speed.source +
           ". Nothing was measured on " + gpu + ".";
  }
  return text + SpeedNotes(speed);
}

void StepTimeChart(const Job& job, const Cluster& cluster, const Recommendation& rec,
                   const std::string& gpu, const DeviceSpeed& speed, const PageCalibration* cal,
                   HtmlPage* page) {
  // Measured steps of this very model, when the calibration is this type's own.
  std::vector<const TimingSample*> measured;
  if (cal && speed.reference.empty())
    for (const TimingSample& s : cal->calibration.samples)
      if (SameCost(s.features, job.features)) measured.push_back(&s);
  // Or the profile's points, on the type it was timed on.
  std::vector<const ProfilePoint*> profiled;
  if (job.profile && speed.reference.empty())
    for (const ProfilePoint& q : ProfileOn(job, gpu).points) profiled.push_back(&q);

  // The batch range the candidates (and the measurements) ask of this type.
  double most = 0;
  auto widen = [&](const Allocation& a) {
    for (const Part& p : a.parts)
      if (p.gpu == gpu) most = std::max(most, double(p.per_gpu_batch));
  };
  for (const Allocation& a : rec.ranked) widen(a);
  for (const Allocation& a : rec.rejected) widen(a);
  widen(rec.fastest);
  for (const TimingSample* s : measured) most = std::max(most, double(s->batch));
  for (const ProfilePoint* q : profiled) most = std::max(most, double(q->batch));
  if (most <= 0)
    most = double(job.per_gpu_batch > 0 ? job.per_gpu_batch : std::max(1, job.spec.batch_size));

  double slowest = speed.seconds(most);
  for (const TimingSample* s : measured) slowest = std::max(slowest, s->seconds);
  for (const ProfilePoint* q : profiled) slowest = std::max(slowest, q->step_s);
  const Unit unit = StepUnit(slowest);

  svg::Chart chart;
  chart.title = gpu + ": step time vs local batch";
  chart.x_label = "local batch (samples per GPU per step)";
  chart.y_label = "step time (" + unit.name + ")";
  chart.x_min = 0;
  chart.y_min = 0;
  svg::Series line;
  line.name = "t(b) = " + In(speed.fixed_s, unit) + " + " + In(speed.per_sample_s, unit) + " * b";
  line.style = svg::Style::Line;
  for (double b : {0.0, most}) {
    line.x.push_back(b);
    line.y.push_back(speed.seconds(b) / unit.size);
  }
  chart.series.push_back(std::move(line));
  if (!measured.empty()) {
    svg::Series points;
    points.name = "measured (" + std::filesystem::path(cal->path).filename().string() + ")";
    points.style = svg::Style::Points;
    for (const TimingSample* s : measured) {
      points.x.push_back(double(s->batch));
      points.y.push_back(s->seconds / unit.size);
      points.labels.push_back(s->model + ": batch " + std::to_string(s->batch) + ", " +
                              In(s->seconds, unit) + " measured, " +
                              In(speed.seconds(double(s->batch)), unit) + " on the line");
    }
    chart.series.push_back(std::move(points));
  }
  if (!profiled.empty()) {
    svg::Series points;
    points.name =
        "profiled (" + std::filesystem::path(ProfileOn(job, gpu).origin).filename().string() + ")";
    points.style = svg::Style::Points;
    for (const ProfilePoint* q : profiled) {
      points.x.push_back(double(q->batch));
      points.y.push_back(q->step_s / unit.size);
      points.labels.push_back("batch " + std::to_string(q->batch) + ": " + In(q->step_s, unit) +
                              " median of " + std::to_string(q->steps) + " steps, " +
                              In(speed.seconds(double(q->batch)), unit) + " on the line");
    }
    chart.series.push_back(std::move(points));
  }
  const Allocation& chosen = Chosen(rec);
  svg::Series mark;
  mark.name = "chosen";
  mark.style = svg::Style::Points;
  mark.color = "#000000";
  for (const Part& p : chosen.parts) {
    if (p.gpu != gpu) continue;
    const double b = double(p.per_gpu_batch);
    mark.x.push_back(b);
    mark.y.push_back(speed.seconds(b) / unit.size);
    mark.labels.push_back("chosen, " + AllocationName(chosen) + ": batch " +
                          std::to_string(p.per_gpu_batch) + ", " + In(speed.seconds(b), unit));
  }
  if (!mark.x.empty()) chart.series.push_back(std::move(mark));
  page->raw(svg::Render(chart));
  page->paragraph(
      job.profile ? ProfileSourceText(
                        ProfileOn(job, speed.reference.empty() ? gpu : speed.reference), gpu, speed)
                  : SourceText(gpu, speed, cluster, cal, measured.size()));
  if (!speed.stale.empty()) page->note("warning: " + speed.stale);
}

}  // namespace

void KeepCandidatesForPage(Job* job) {
  if (job->top > 0) job->top = std::max(job->top, kPageRanked);
  job->rejected = std::max(job->rejected, kPageRejected);
}

std::map<std::string, PageCalibration> LoadSpeedCalibrations(const Cluster& cluster,
                                                             const Recommendation& rec) {
  std::map<std::string, PageCalibration> out;
  for (const auto& [gpu, speed] : rec.speeds) {
    const std::string owner = speed.reference.empty() ? gpu : speed.reference;
    const GpuType* g = cluster.gpu(owner);
    if (!g || g->calibration.empty() || out.count(owner)) continue;
    try {
      out[owner] = {g->calibration, LoadCalibration(g->calibration)};
    } catch (const EstimateError& e) {
      throw EstimateError("GPU type \"" + owner + "\": " + e.what());
    }
  }
  return out;
}

std::string AllocationName(const Allocation& a) {
  std::string out;
  for (const Part& p : a.parts) out += (out.empty() ? "" : " + ") + PartCellText(p);
  return out;
}

std::string RecommendationHtml(const Job& job, const Cluster& cluster, const Recommendation& rec,
                               const std::map<std::string, PageCalibration>& calibrations) {
  const std::string model = job.spec.name.empty() ? job.spec.origin : job.spec.name;
  HtmlPage page("dlh-estimate recommend: " + model + " on " + cluster.name);
  Asked(job, cluster, rec, &page);

  page.heading("Chosen: " + AllocationName(Chosen(rec)));
  ChosenFacts(job, rec, &page);

  // One time and one energy unit for the chart and the tables.
  double most_s = Chosen(rec).total_s, most_j = Chosen(rec).energy_j;
  for (const auto* list : {&rec.ranked, &rec.rejected})
    for (const Allocation& a : *list) {
      most_s = std::max(most_s, a.total_s);
      most_j = std::max(most_j, a.energy_j);
    }
  const Unit time = TimeUnit(std::max(most_s, job.deadline_s));
  const Unit energy = EnergyUnit(most_j);

  page.heading("Candidates: time vs energy");
  CandidatesChart(job, rec, time, energy, &page);

  page.heading("Ranked candidates");
  RankedTable(rec, energy, &page);

  page.heading("Step time per GPU type");
  page.paragraph(
      "How long one training step of this model takes on one GPU of each type with b samples: "
      "the line every prediction above is built on (allreduce time comes on top).");
  for (const auto& [gpu, speed] : rec.speeds) {
    auto it = calibrations.find(speed.reference.empty() ? gpu : speed.reference);
    StepTimeChart(job, cluster, rec, gpu, speed, it == calibrations.end() ? nullptr : &it->second,
                  &page);
  }

  if (!rec.rejected.empty()) {
    page.heading("Left out");
    page.paragraph("The best " + std::to_string(rec.rejected.size()) + " allocations by " +
                   ObjectiveName(job.objective) + " that were ruled out, and why.");
    RejectedTable(rec, energy, &page);
  }
  return page.render();
}

}  // namespace dlh
