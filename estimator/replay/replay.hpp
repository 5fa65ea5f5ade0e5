// DLH replay — a job trace through the real planning code on a simulated cluster, once per
// policy (`dlh-estimate replay`, docs/reference/replay.md), and what came of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/replay/policies.hpp"
#include "estimator/replay/scheduler.hpp"
#include "estimator/replay/simulator.hpp"
#include "estimator/replay/workload.hpp"

namespace dlh::replay {

// One pool per node type of the cluster, in its order (a node type's devices are its units).
std::vector<Pool> PoolsOf(const Cluster& cluster);

// One policy's figures. Energy is the jobs' own (the recommender's prediction for each
// job's allocation, stretched by its noise): nodes left idle are not counted.
struct PolicyMetrics {
  std::string policy;
  int jobs = 0, ran = 0, unplanned = 0;
  int with_deadline = 0, met = 0;  // jobs with a deadline; those ended within it
  double energy_j = 0;
  double gpu_hours = 0;   // GPUs x real time, every job (CPU ranks not counted)
  double mean_units = 0;  // devices per job: GPUs, or ranks on a CPU node type
  double wait_mean_s = 0, wait_median_s = 0, wait_p95_s = 0;  // start - submit
  // Busy GPU-seconds over the GPUs' capacity x makespan (CountedPools: a CPU node type's
  // ranks are another resource); utilisation_by_type has every node type's own.
  double utilisation = 0;
  std::vector<double> utilisation_by_type;
  double makespan_s = 0;  // first submission to last end
  double wall_s = 0;      // this machine's time to plan and replay it
  int64_t recommend_calls = 0;
  std::vector<double> wait_quantiles;             // 0%, 1%, ..., 100% (nearest rank)
  std::vector<double> series_hours, series_busy;  // utilisation over time, in bins (GPUs)
  std::vector<std::string> notes;                 // why jobs could not run
  double met_share() const { return with_deadline > 0 ? double(met) / with_deadline : 0; }
};

// The figures of one simulation (`wall_s` and `recommend_calls` left for the caller).
PolicyMetrics Measure(const std::string& policy, const std::vector<ReplayJob>& jobs,
                      const Simulation& sim, const std::vector<Pool>& pools);

struct ReplayOptions {
  std::vector<Policy> policies;
  SchedulerOptions scheduler;
};

// Every policy in turn on the same jobs.
std::vector<PolicyMetrics> RunReplay(const std::vector<ReplayJob>& jobs, Workload& workload,
                                     const ReplayOptions& options);

}  // namespace dlh::replay
