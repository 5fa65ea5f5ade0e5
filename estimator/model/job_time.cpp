// DLH estimator — the whole-job time model.
#include "estimator/model/job_time.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/count_limits.hpp"
#include "common/duration.hpp"

namespace dlh {

JobWork WorkOf(const ModelFeatures& f, int64_t samples, int64_t eval_samples, int epochs,
               int optimizer_slots) {
  JobWork w;
  w.samples = samples;
  w.eval_samples = std::max<int64_t>(0, eval_samples);
  w.epochs = epochs;
  w.data_bytes = (double(samples) + double(w.eval_samples)) * (f.input_elements + 1);
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
    const int64_t slice = CeilDiv(work.eval_samples, step.gpus);
    const int64_t chunks = CeilDiv(slice, kEvalChunk);
    const double pass =
        work.forward_fraction * (double(slice) * step.per_sample_s + double(chunks) * step.fixed_s);
    p.evaluations = work.epochs;
    p.eval_s = double(p.evaluations) * pass;
  }
  const double write_s =
      kCheckpointFixedSeconds + work.checkpoint_bytes / (runtime.write_gbs * 1e9);
  p.stop_s = step.step_s + write_s;
  p.checkpoints = work.epochs + int64_t(std::floor(p.steps_s / kCheckpointEverySeconds));
  if (p.checkpoints > 0) {
    // The last is waited for whole; each other holds the loop for its snapshot and for what
    // is left of the previous write when the interval is shorter than a write.
    const double interval_s = p.steps_s / double(p.checkpoints);
    const double background_s =
        work.checkpoint_bytes / (kSnapshotGbs * 1e9) + std::max(0.0, write_s - interval_s);
    p.checkpoint_s = write_s + double(p.checkpoints - 1) * background_s;
  }
  return p;
}

namespace {

// The rate at t threads from rates measured at 1..size() threads; beyond the last, sgemm
// (`grows`) grown in proportion to the threads, an optimistic bound, and memory bandwidth
// kept at its last value (it saturates: 1.17x from 1 to 2 threads on the project's host,
// BENCHMARKS.md). 0 when none is usable.
double RateAt(const std::vector<double>& by_threads, int t, bool grows) {
  if (by_threads.empty() || t < 1) return 0;
  const size_t last = by_threads.size();
  if (size_t(t) <= last) return by_threads[size_t(t) - 1];
  return by_threads[last - 1] * (grows ? double(t) / double(last) : 1.0);
}

bool Usable(const std::vector<double>& by_threads) {
  if (by_threads.empty()) return false;
  for (double v : by_threads)
    if (!(v > 0) || !std::isfinite(v)) return false;
  return true;
}

// The fallback exponent (job_time.hpp) comes from the AMD EPYC host of BENCHMARKS.md (a
// quiet machine): the example CNN took 53.49 ms at 1 thread and 29.10 ms at 2 (1.84x), the
// other six validation models 1.81-1.95x. Measured again on 2026-11-28 on a 2-core Intel
// Xeon host (OpenBLAS's Prescott kernels) with `dlh-estimate profile
// share/examples/fashion-mnist.json --threads 1|2 --steps 20`, interleaved, 3 rounds each:
// 1 thread 182 / 184 / 215 ms (min / median / max), 2 threads 174 / 232 / 236 ms, under a
// load average of 1.9-2.7 from other work on the same 2 cores: a second thread then finds no
// free core, so that run says nothing about scaling and is not used. This is
// ThreadTimeRatio from the probe's curves alone (job_time.hpp).
double CurvesTimeRatio(const ThreadScaling& scaling, int from, int to, int sharing) {
  const bool flops = Usable(scaling.gflops), bytes = Usable(scaling.gbs);
  if (!flops && !bytes)
    return from == to ? 1 : std::pow(double(from) / double(to), kThreadScalingExponent);
  const double compute = flops && bytes ? std::min(1.0, std::max(0.0, scaling.compute_fraction))
                         : flops        ? 1.0
                                        : 0.0;
  double ratio = 0;
  if (compute > 0) {
    // Threads never help more than in proportion: a reading above it is a noisy probe (one
    // read 16.6 GFLOP/s at 1 thread and 42.4 at 2 on the CI host, which predicted 2 ranks of
    // 1 thread 69% too slow).
    const double linear = double(from) / double(to);
    const double r = RateAt(scaling.gflops, from, true) / RateAt(scaling.gflops, to, true);
    ratio += compute * std::min(std::max(r, std::min(1.0, linear)), std::max(1.0, linear));
  }
  if (compute < 1) {
    // The ranks running at once split the bandwidth all their threads together reach.
    const double mine = RateAt(scaling.gbs, to * sharing, false) / sharing;
    ratio += (1 - compute) * RateAt(scaling.gbs, from, false) / mine;
  }
  return ratio;
}

}  // namespace

// Why a measured whole-step ratio comes first: on the AMD EPYC host of BENCHMARKS.md's whole
// jobs (2026-12-05), the probe's curves said a step at 1 thread takes about 1.95x its time at
// 2 (sgemm 112 and 223 GFLOP/s, memory 45 and 99 GB/s), the calibration timed 1.68x on whole
// steps, and 2 ranks of 1 thread each ran the example CNN's samples at 1.63x the time one rank
// of 2 threads took: the curves over-predicted each such job by about a fifth.
double ThreadTimeRatio(const ThreadScaling& scaling, int from, int to, int sharing) {
  if (from < 1 || to < 1) return 1;
  sharing = std::max(1, sharing);
  const auto& measured = scaling.measured_step_ratio;
  const auto at_from = measured.find(from), at_to = measured.find(to);
  if (at_from != measured.end() && at_to != measured.end() && at_from->second > 0 &&
      at_to->second > 0) {
    const double contention = sharing > 1
                                  ? std::max(1.0, CurvesTimeRatio(scaling, from, to, sharing) /
                                                      CurvesTimeRatio(scaling, from, to, 1))
                                  : 1.0;
    return at_to->second / at_from->second * contention;
  }
  return CurvesTimeRatio(scaling, from, to, sharing);
}

int RankThreads(int cores, int ranks, int threads_per_rank) {
  return threads_per_rank > 0 ? threads_per_rank : std::max(1, cores / ranks);
}

double Oversubscription(int cores, int ranks, int threads_per_rank) {
  return std::max(1.0, double(ranks) * RankThreads(cores, ranks, threads_per_rank) / double(cores));
}

double LearnedLogAt(const std::map<int, double>& learned, int ranks) {
  // The count itself where measured, else the largest measured count of 2 or more below it:
  // more ranks contend at least as much (4 ranks on 2 cores also run 2 at once).
  auto at = learned.upper_bound(ranks);
  if (at != learned.begin() && (--at)->first >= std::min(ranks, 2)) return at->second;
  return 0;
}

CpuShare CpuRankShare(int calibration_threads, int cores, int ranks, const ThreadScaling& scaling,
                      int threads_per_rank) {
  CpuShare s;
  if (calibration_threads <= 0 || cores <= 0 || ranks <= 0) return s;
  const int threads = RankThreads(cores, ranks, threads_per_rank);
  const double oversubscribed = Oversubscription(cores, ranks, threads_per_rank);
  // The ranks running at once: all of them, or as many as the cores hold when they take turns.
  const int running = std::max(1, std::min(ranks, cores / threads));
  s.per_sample = ThreadTimeRatio(scaling, calibration_threads, threads, running) * oversubscribed;
  s.fixed = oversubscribed;
  s.oversubscribed = oversubscribed;
  s.wait_s = (oversubscribed - 1) * kOversubscribedWaitS;
  const double f = std::exp(LearnedLogAt(scaling.learned_log_by_ranks, ranks));
  s.per_sample *= f;
  s.fixed *= f;
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
