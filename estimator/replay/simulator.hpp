// DLH replay — the discrete-event loop: jobs arrive, are planned against the cluster as it
// is at that moment, wait in the scheduler's queue (scheduler.hpp), run and end.
//
// Events at one instant are handled in this order: the jobs that end, then the jobs that
// arrive (each planned on what is free after those ends), then one scheduling pass. A job's
// plan is made once, when it arrives: as `sbatch --dlh-auto` plans it at submission (the
// SPANK plugin reads the free nodes then), and the request stays as planned while it waits.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "estimator/replay/scheduler.hpp"

namespace dlh::replay {

// What happened to one job.
struct JobRun {
  double submit_s = 0;
  double start_s = -1;  // -1: never ran (no plan: see Simulation::unplanned)
  double end_s = -1;
  Shape shape;  // the shape it ran as
};

// Makes a job's request when it arrives: `free_nodes` holds the whole nodes free now, per
// pool (Scheduler::FreeNodes). A request without shapes (or an exception derived from
// std::exception) means the job cannot run at all under this policy.
using Planner = std::function<Request(int job, double now_s, const std::vector<int>& free_nodes)>;

// The pools whose units utilisation and GPU-hours count: the GPU node types (a CPU node
// type's ranks are another resource); every pool when none is a GPU pool.
std::vector<bool> CountedPools(const std::vector<Pool>& pools);

struct Simulation {
  std::vector<JobRun> jobs;  // by job index
  // Units of the counted pools in use from each time on, one entry per change (utilisation
  // over time).
  std::vector<std::pair<double, int>> busy_steps;
  std::vector<double> busy_unit_seconds;  // per pool, integrated over the run
  double first_submit_s = 0, last_end_s = 0;
  int unplanned = 0;               // jobs with no request that fits
  std::vector<std::string> notes;  // the first few reasons for those
};

// Replays the jobs (their submission times, any order) on `pools`. Deterministic: the same
// inputs and planner give the same result.
Simulation Simulate(const std::vector<Pool>& pools, const std::vector<double>& submit_s,
                    const Planner& plan, const SchedulerOptions& options);

}  // namespace dlh::replay
