// DLH estimator — the deadline-driven allocation recommender.
//
// For every candidate allocation (one GPU type: gpus per node x nodes; or, when allowed, a
// mix of two types with full nodes) it predicts
//   step   = compute(slowest GPU, its local batch) + allreduce(gradient bytes)
//   time   = startup + steps * step,  steps = epochs * floor(samples / global batch)
//   energy = steps * sum over GPUs (active W * compute + idle W * allreduce)
//            + time * nodes * node base W + startup * GPUs * idle W
// drops candidates that do not fit in GPU memory or miss the deadline (time * (1 + margin)),
// and ranks the rest by the objective (ties: fewer GPUs, then faster).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/spec.hpp"
#include "estimator/cluster.hpp"
#include "estimator/comm_model.hpp"
#include "estimator/features.hpp"
#include "estimator/time_model.hpp"

namespace dlh {

enum class Objective { Energy, Time, GpuHours };
Objective ParseObjective(const std::string& text);  // throws UsageError
const char* ObjectiveName(Objective o);

struct Job {
  TrainSpec spec;
  ModelFeatures features;
  int64_t samples = 0;        // training samples per epoch
  int epochs = 0;
  double deadline_s = 0;      // 0: none
  Objective objective = Objective::Energy;
  int max_gpus = 0;           // 0: no limit
  std::vector<std::string> allowed_types;  // empty: all
  bool allow_mixed = false;
  int64_t per_gpu_batch = 0;  // 0: keep the spec's global batch; > 0: weak scaling, the
                              // global batch grows with the GPUs and lr scales linearly
  double margin = 0.10;       // safety margin on predicted time for deadline and time limit
  double startup_s = 30;      // launch, data loading, first-step warm-up
};

// How one GPU type's step time depends on its local batch: t(b) = fixed + per_sample * b
// (the time model is affine in b), and where that came from.
struct DeviceSpeed {
  double fixed_s = 0;
  double per_sample_s = 0;
  std::string source;  // "calibrated (file)" or "roofline (no calibration for a100)"
  double seconds(double batch) const { return fixed_s + per_sample_s * batch; }
};

// Per-type speeds for the job's model: from each GPU type's calibration when it has one,
// else a roofline from its peak FLOP/s and memory bandwidth.
std::map<std::string, DeviceSpeed> DeviceSpeeds(const Job& job, const Cluster& cluster);

struct Part {
  std::string node_type, gpu;
  int nodes = 0, gpus_per_node = 0;
  int64_t per_gpu_batch = 0;
};

struct Allocation {
  std::vector<Part> parts;  // one, or two for a mix
  int gpus = 0, nodes = 0;
  int64_t global_batch = 0;
  double lr = 0;            // learning rate for global_batch (linear scaling)
  double warmup_epochs = 0;
  double compute_s = 0, comm_s = 0, step_s = 0;  // per step
  int64_t steps = 0;
  double total_s = 0;       // predicted wall time
  double energy_j = 0;
  double gpu_hours = 0;
  double memory_bytes = 0;  // per GPU, the largest
  bool fits_memory = true;
  bool meets_deadline = true;
  std::string why;          // one line: why this one ranks where it does
};

struct Recommendation {
  bool feasible = false;                // some allocation meets the deadline and fits
  std::vector<Allocation> ranked;       // feasible ones, best first
  Allocation fastest;                   // fastest that fits memory (for impossible deadlines)
  double miss_s = 0;                    // fastest.total_s * (1+margin) - deadline when infeasible
  int candidates = 0;                   // allocations considered
  std::map<std::string, DeviceSpeed> speeds;
};

// Throws EstimateError when nothing fits at all (e.g. the model exceeds every GPU's memory).
Recommendation Recommend(const Job& job, const Cluster& cluster);

// Splits `global_batch` over GPU groups so that each GPU finishes its step at the same time:
// group g has count[g] GPUs of speed[g]; returns the per-GPU batch of each group (integers
// summing, over all GPUs, to global_batch; every GPU gets at least 1 when possible).
std::vector<int64_t> BalanceBatch(const std::vector<DeviceSpeed>& speed,
                                  const std::vector<int>& count, int64_t global_batch);

// The plan handed to the plugin and the launcher (DLH_PLAN): README "Plan".
nlohmann::json PlanJson(const Job& job, const Recommendation& rec, const Allocation& chosen);

// Slurm's time limit for a predicted duration: (1 + margin) * seconds, rounded up to whole
// minutes, formatted "D-HH:MM:SS" or "HH:MM:SS".
std::string SlurmTimeLimit(double seconds, double margin);

}  // namespace dlh
