// DLH — a program's run as a DLH run (see run_records.hpp).
#include "launcher/run/run_records.hpp"

#include <cmath>

#include "common/median.hpp"
#include "launcher/run/child.hpp"

namespace dlh {
namespace {

constexpr const char* kSplit[3] = {"data", "compute", "allreduce"};

nlohmann::json NumberOrNull(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace

void RankFigures::ToArray(double* out) const {
  const double v[kFigures] = {batch,          data_s,       compute_s, allreduce_s,
                              cpu_cores_busy, peak_rss_mib, samples};
  for (int i = 0; i < kFigures; ++i) out[i] = v[i];
}

RankFigures RankFigures::FromArray(const double* in) {
  RankFigures f;
  f.batch = in[0];
  f.data_s = in[1];
  f.compute_s = in[2];
  f.allreduce_s = in[3];
  f.cpu_cores_busy = in[4];
  f.peak_rss_mib = in[5];
  f.samples = in[6];
  return f;
}

void RunRecorder::Start(std::vector<nlohmann::json>* out, const std::string& device, double t) {
  if (started_) return;
  started_ = true;
  const std::string from = !resumed_from_.empty() ? resumed_from_ : c_.checkpoint;
  nlohmann::json rec = {
      {"event", "start"},
      {"t", c_.launch_unix},
      {"step", step_},
      {"resumed_from", from.empty() ? nlohmann::json(nullptr) : nlohmann::json(from)},
      {"run_id", c_.run_id},
      {"world_size", c_.world_size},
      {"hosts", c_.hosts},
      {"spec_name", c_.program},
      {"command", c_.command}};
  if (!device.empty()) rec["device"] = device;
  if (!c_.rank_batches.empty()) rec["rank_batches"] = c_.rank_batches;
  if (c_.total_steps > 0) rec["total_steps"] = c_.total_steps;
  if (!c_.plan.is_null()) rec["plan"] = c_.plan;
  // A start that only comes with a later line still opens the run where it began.
  if (!(c_.launch_unix > 0)) rec["t"] = t;
  out->push_back(std::move(rec));
}

void RunRecorder::Flush(std::vector<nlohmann::json>* out, double t) {
  for (int s : held_signals_)
    out->push_back({{"event", "signal"},
                    {"t", t},
                    {"step", step_},
                    {"signal", SignalName(s)},
                    {"checkpoint", last_checkpoint_.empty() ? nlohmann::json(nullptr)
                                                            : nlohmann::json(last_checkpoint_)}});
  held_signals_.clear();
}

std::vector<nlohmann::json> RunRecorder::Take(const ProgressEvent& e, const std::string& device,
                                              double t) {
  std::vector<nlohmann::json> out;
  using Kind = ProgressEvent::Kind;
  if (e.kind == Kind::kResume) {
    // Before the first step it says where the run starts; later it moves the count on.
    step_ = e.step;
    if (!started_ && !e.path.empty()) resumed_from_ = e.path;
    Start(&out, device, t);
    return out;
  }
  Start(&out, device, t);
  if (e.kind == Kind::kStep) {
    ++step_;
    ++steps_run_;
    if (e.epoch >= 0) epoch_ = e.epoch;
    if (e.samples > 0) samples_.push_back(double(e.samples));
    nlohmann::json time = nlohmann::json::object();
    // The first step line's gap would be the program's start-up, not a step.
    double total = steps_run_ > 1 ? t - previous_step_t_ : std::nan("");
    double parts = 0;
    for (int i = 0; i < 3; ++i) {
      const double v = e.value(kSplit[i], std::nan(""));
      if (!std::isfinite(v)) continue;
      time[kSplit[i]] = v;
      parts += v;
      sums_[i] += v;
      ++counts_[i];
    }
    // Lines the launcher read in one go (a busy node) share one arrival time: their gap says
    // nothing, so the step's own timed parts stand for it, or it has no total at all.
    if (std::isfinite(total) && !(total > 0)) total = parts > 0 ? parts : std::nan("");
    if (std::isfinite(total)) time["total"] = total;
    nlohmann::json rec = {
        {"step", step_}, {"t", t}, {"loss", NumberOrNull(e.value("loss", std::nan("")))}};
    if (epoch_ >= 0) rec["epoch"] = epoch_;
    const double accuracy = e.value("accuracy", std::nan(""));
    if (std::isfinite(accuracy)) rec["accuracy"] = accuracy;
    const double lr = e.value("lr", std::nan(""));
    if (std::isfinite(lr)) {
      rec["lr"] = lr;
      last_lr_ = lr;
    }
    double rate = e.value("samples_per_s", std::nan(""));
    if (!std::isfinite(rate) && e.samples > 0 && total > 0) {
      // Rank 0's share of the global batch stands for the whole job's.
      const double scale = !c_.rank_batches.empty() && c_.rank_batches[0] > 0 && c_.global_batch > 0
                               ? double(c_.global_batch) / double(c_.rank_batches[0])
                               : double(c_.world_size);
      rate = double(e.samples) * scale / total;
    }
    if (std::isfinite(rate)) rec["samples_per_s"] = rate;
    rec["time"] = time;
    if (steps_run_ == 1 && !c_.rank_batches.empty()) rec["rank_batches"] = c_.rank_batches;
    if (steps_run_ == 1) first_step_t_ = t;
    previous_step_t_ = last_step_t_ = t;
    out.push_back(std::move(rec));
    return out;
  }
  if (e.kind == Kind::kEval) {
    nlohmann::json rec = {{"event", "eval"}, {"t", t}};
    const int64_t epoch = e.epoch >= 0 ? e.epoch : epoch_;
    if (epoch >= 0) rec["epoch"] = epoch;
    rec["step"] = e.step >= 0 ? e.step : step_;
    nlohmann::json metrics = nlohmann::json::object();
    for (const auto& [name, v] : e.values) rec[name] = metrics[name] = v;
    last_eval_ = metrics;
    out.push_back(std::move(rec));
    return out;
  }
  // A checkpoint.
  nlohmann::json rec = {
      {"event", "checkpoint"}, {"t", t}, {"step", e.step}, {"path", e.path}, {"background", false}};
  if (c_.file_bytes) {
    const int64_t bytes = c_.file_bytes(e.path);
    if (bytes >= 0) rec["bytes"] = bytes;
  }
  last_checkpoint_ = e.path;
  ++checkpoints_;
  out.push_back(std::move(rec));
  return out;
}

void RunRecorder::Signal(int signal, double) { held_signals_.push_back(signal); }

std::vector<nlohmann::json> RunRecorder::End(bool finished, int stop_signal,
                                             const std::string& device, double t) {
  std::vector<nlohmann::json> out;
  Start(&out, device, t);
  Flush(&out, t);
  out.push_back({{"event", "end"},
                 {"t", t},
                 {"step", step_},
                 {"finished", finished},
                 {"stop_signal",
                  stop_signal ? nlohmann::json(SignalName(stop_signal)) : nlohmann::json(nullptr)},
                 {"train_seconds", t - c_.launch_unix}});
  return out;
}

RankFigures RunRecorder::Figures() const {
  RankFigures f;
  f.batch = samples_.empty() ? 0 : Median(samples_);
  if (!samples_.empty() && int64_t(samples_.size()) == steps_run_)
    for (double n : samples_) f.samples += n;
  double* split[3] = {&f.data_s, &f.compute_s, &f.allreduce_s};
  for (int i = 0; i < 3; ++i)
    if (counts_[i] > 0) *split[i] = sums_[i] / double(counts_[i]);
  return f;
}

nlohmann::json RunSummary(const RunSummaryInputs& in) {
  const RunContext& c = *in.context;
  const RunRecorder& r = *in.rank0;
  const double wall_s = in.ended_unix - c.launch_unix;
  nlohmann::json s = {
      {"program", c.program},
      {"command", c.command},
      {"name", c.program},
      {"ranks", c.world_size},
      {"device", in.device.empty() ? "unknown" : in.device},
      {"steps", r.step()},
      {"finished", in.finished},
      {"stop_signal", in.stop_signal},
      {"last_checkpoint", !r.last_checkpoint().empty() ? r.last_checkpoint() : c.checkpoint},
      {"train_seconds", wall_s}};
  if (c.total_steps > 0) s["total_steps"] = c.total_steps;
  if (in.lr > 0) {
    s["lr"] = in.lr;
    s["lr_source"] = "plan";
  } else if (r.last_lr() > 0) {
    s["lr"] = r.last_lr();
    s["lr_source"] = "program";
  }
  // The batches the step lines gave, else the plan's.
  std::vector<int64_t> batches;
  for (size_t i = 0; i < in.ranks.size(); ++i)
    batches.push_back(in.ranks[i].batch > 0       ? int64_t(std::llround(in.ranks[i].batch))
                      : i < c.rank_batches.size() ? c.rank_batches[i]
                                                  : 0);
  s["batch_split"] = in.rank_types.empty() ? "even" : "plan";
  s["rank_batches"] = batches;
  if (!in.rank_types.empty()) s["rank_gpu_types"] = in.rank_types;
  nlohmann::json split = nlohmann::json::object();
  const std::pair<const char*, double RankFigures::*> kinds[] = {
      {"compute", &RankFigures::compute_s},
      {"allreduce", &RankFigures::allreduce_s},
      {"data", &RankFigures::data_s}};
  for (const auto& [name, field] : kinds) {
    nlohmann::json per_rank = nlohmann::json::array();
    bool any = false;
    for (const RankFigures& f : in.ranks) {
      per_rank.push_back(NumberOrNull(f.*field));
      any = any || std::isfinite(f.*field);
    }
    if (any) split[name] = per_rank;
  }
  if (!split.empty()) s["rank_step_seconds"] = split;
  nlohmann::json busy = nlohmann::json::array(), rss = nlohmann::json::array();
  for (const RankFigures& f : in.ranks) {
    busy.push_back(NumberOrNull(f.cpu_cores_busy));
    rss.push_back(NumberOrNull(f.peak_rss_mib));
  }
  s["rank_process"] = {{"cpu_cores_busy", busy}, {"peak_rss_mib", rss}};
  s["energy"] = in.energy.is_object()
                    ? in.energy
                    : nlohmann::json{{"measured", false}, {"why", "not measured"}};
  s["checkpoints"] = {{"mode", "program"}, {"written", r.checkpoints()}};
  if (r.last_eval().is_object()) {
    s["evaluation"] = r.last_eval();
    for (const char* key : {"test_accuracy", "test_loss"})
      if (r.last_eval().contains(key)) s[key] = r.last_eval()[key];
  }
  // The step time: the step lines' gaps, the first step (the start-up's end) left out.
  const int64_t gaps = r.steps_run() - 1;
  const double step_s =
      gaps > 0 ? (r.last_step_unix() - r.first_step_unix()) / double(gaps) : std::nan("");
  if (in.predicted_step_s > 0 && std::isfinite(step_s)) {
    s["prediction"] = {{"origin", in.plan_origin},
                       {"total_s", in.predicted_total_s},
                       {"step_s", in.predicted_step_s},
                       {"steps", in.predicted_steps},
                       {"time_limit_s", in.time_limit_s}};
    const bool whole_job = in.finished && c.checkpoint.empty();
    s["measured"] = {{"total_s", wall_s},
                     {"step_s", step_s},
                     {"whole_job", whole_job},
                     {"phases",
                      {{"startup_s", r.first_step_unix() - c.launch_unix},
                       {"steps_s", r.last_step_unix() - r.first_step_unix()}}},
                     {"step_error_pct", 100 * (in.predicted_step_s - step_s) / step_s}};
    if (whole_job && in.predicted_total_s > 0)
      s["measured"]["total_error_pct"] = 100 * (in.predicted_total_s - wall_s) / wall_s;
  } else if (in.predicted_total_s > 0 && wall_s > 0) {
    // A program without step lines: its whole time against the plan's, nothing finer.
    s["prediction"] = {{"origin", in.plan_origin},
                       {"total_s", in.predicted_total_s},
                       {"time_limit_s", in.time_limit_s}};
    const bool whole_job = in.finished && c.checkpoint.empty();
    s["measured"] = {{"total_s", wall_s}, {"whole_job", whole_job}};
    if (whole_job)
      s["measured"]["total_error_pct"] = 100 * (in.predicted_total_s - wall_s) / wall_s;
  }
  return s;
}

}  // namespace dlh
