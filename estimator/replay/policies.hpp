// DLH replay — who decides each job's allocation, and the jobs made ready for it.
//
//   user        the users' own requests as the trace gives them: the GPU count (and type,
//               when named; else any GPU node type that holds it, in the cluster's order)
//               and their time limit
//   dlh-energy  DLH as `sbatch --dlh-auto` plans at submission, as if the user had set no GPU
//               option (any node type, CPU ones included): the least energy meeting the
//               deadline on the whole nodes free then; when nothing free meets it, planned on
//               all nodes, to wait for them (estimator/plan/plan.cpp, MakePlan)
//   dlh-time    the same with the shortest time as the objective
//   max-gpus    the most devices the model can use (its global batch split one sample or
//               more per device), on any GPU node type that allows that many (fastest
//               first)
//   one-gpu     one GPU of the type with the least energy
// (A user's request asks for GPUs: `user`, `max-gpus` and `one-gpu` run on the GPU node types,
// Workload::RequestPools.)
// A job's real time on the allocation it gets is the recommender's prediction there times
// exp(log_sigma x z): z is the job's own standard normal draw, the same under every policy,
// and log_sigma the uncertainty of the speed of the devices it runs on
// (DeviceSpeed::log_sigma); its energy is the prediction's times the same factor. DLH's
// plans, max-gpus and one-gpu take the prediction band's upper end as their time limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "estimator/replay/scheduler.hpp"
#include "estimator/replay/trace.hpp"
#include "estimator/replay/workload.hpp"

namespace dlh::replay {

enum class Policy { User, DlhEnergy, DlhTime, MaxGpus, OneGpu };
const char* PolicyName(Policy p);
// "user,dlh-energy" (every name of the list once); "all" or "": every policy. Throws
// UsageError naming the unknown one.
std::vector<Policy> ParsePolicies(const std::string& list);

// A job of the trace, resolved: what it trains, and the user's request.
struct ReplayJob {
  std::string id;
  double submit_s = 0;
  Training training;
  double deadline_s = 0;  // after submission; 0: none
  double noise_z = 0;     // its standard normal draw (the same under every policy)
  // The user's own request.
  int units = 0;
  int nodes = 0;            // 0: as many as the count needs on the node type
  std::string device_type;  // "": any
  double limit_s = 0;       // 0: none asked (the scheduler then assumes kNoLimitSeconds)
};

// What a time limit of UNLIMITED counts as in reservations: 7 days.
constexpr double kNoLimitSeconds = 7 * 86400;

// The trace's jobs for the replay: networks and spec files resolved; a row without DLH
// columns gets a network matched to its elapsed time (MatchTraining); the noise draws come
// from std::mt19937_64(seed) in the trace's order. Throws UsageError naming the trace's
// line for a GPU type no node type has or a spec that cannot be planned.
std::vector<ReplayJob> PrepareJobs(const Trace& trace, Workload& workload, uint64_t seed);

// The job's request under `policy`, planned at submission with `free_nodes` whole nodes
// free per node type. An empty request: the job cannot run under this policy (none of the
// shapes it would ask for fits the devices' memory). Throws EstimateError as Recommend does.
Request PlanRequest(Policy policy, const ReplayJob& job, Workload& workload,
                    const std::vector<int>& free_nodes);

}  // namespace dlh::replay
