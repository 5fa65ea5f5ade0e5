// DLH estimator — the whole-job time model.
#include "estimator/model/job_time.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/duration.hpp"

namespace dlh {

JobWork WorkOf(const ModelFeatures& f, int64_t samples, int64_t eval_samples, int epochs,
               int optimizer_slots) {
  JobWork w;
  w.samples = samples;
  w.eval_samples = std::max<int64_t>(0, eval_samples);
  w.epochs = epochs;
  w.data_bytes = double(samples + w.eval_samples) * (f.input_elements + 1);
  w.checkpoint_bytes = 4 * f.params * (1 + optimizer_slots);
  const double train = f.flops_train();
  w.forward_fraction = train > 0 ? f.flops_fwd() / train : 1.0 / 3;
  return w;
}

JobPhases PredictJobPhases(const JobWork& work, const StepShape& step, const Runtime& runtime,
                           double startup_s) {
  JobPhases p;
  p.startup_s = startup_s;
  if (work.staged) {
    // Every node copies the whole file at once; the copy is read back for its checksum.
    p.stage_s = work.data_bytes / (runtime.stage_gbs * 1e9) +
                work.data_bytes / (runtime.local_read_gbs * 1e9);
    p.data_s = work.data_bytes / (runtime.local_read_gbs * 1e9);
  } else {
    p.data_s = work.data_bytes / (runtime.read_gbs * 1e9);
  }
  p.warmup_s = kWarmupSteps * step.step_s;
  p.steps_s = double(step.steps) * step.step_s;
  if (work.eval_samples > 0 && step.gpus > 0) {
    // Each rank evaluates a contiguous slice in chunks; the slowest rank's slice decides.
    const int64_t slice = (work.eval_samples + step.gpus - 1) / step.gpus;
    const int64_t chunks = (slice + kEvalChunk - 1) / kEvalChunk;
    const double pass =
        work.forward_fraction * (double(slice) * step.per_sample_s + double(chunks) * step.fixed_s);
    p.evaluations = work.epochs;
    p.eval_s = double(p.evaluations) * pass;
  }
  p.checkpoints = work.epochs + int64_t(std::floor(p.steps_s / kCheckpointEverySeconds));
  if (p.checkpoints > 0) {
    // The last is waited for whole; each other holds the loop for its snapshot and for what
    // is left of the previous write when the interval is shorter than a write.
    const double write_s =
        kCheckpointFixedSeconds + work.checkpoint_bytes / (runtime.write_gbs * 1e9);
    const double interval_s = p.steps_s / double(p.checkpoints);
    const double background_s =
        work.checkpoint_bytes / (kSnapshotGbs * 1e9) + std::max(0.0, write_s - interval_s);
    p.checkpoint_s = write_s + double(p.checkpoints - 1) * background_s;
  }
  return p;
}

CpuShare CpuRankShare(int calibration_threads, int cores, int ranks) {
  CpuShare s;
  if (calibration_threads <= 0 || cores <= 0 || ranks <= 0) return s;
  const int threads = std::max(1, cores / ranks);
  const double oversubscribed = std::max(1.0, double(ranks) * threads / double(cores));
  s.per_sample = double(calibration_threads) / double(threads) * oversubscribed * oversubscribed;
  s.fixed = oversubscribed * oversubscribed;
  return s;
}

std::string PhasesText(const JobPhases& p, int64_t steps) {
  std::string s;
  auto add = [&](const std::string& what, double seconds) {
    if (!(seconds > 0)) return;
    s += (s.empty() ? "" : " + ") + what + " " + HumanDuration(seconds);
  };
  add("start-up", p.startup_s);
  add("staging", p.stage_s);
  add("data", p.data_s);
  add("warm-up", p.warmup_s);
  add(std::to_string(steps) + " steps", p.steps_s);
  add(std::to_string(p.evaluations) + (p.evaluations == 1 ? " evaluation" : " evaluations"),
      p.eval_s);
  add(std::to_string(p.checkpoints) + (p.checkpoints == 1 ? " checkpoint" : " checkpoints"),
      p.checkpoint_s);
  return s;
}

}  // namespace dlh
