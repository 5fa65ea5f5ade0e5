// DLH planning core — an untyped GPU request kept to the planned GPU type (see plan.hpp).
#pragma once

#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"
#include "estimator/plan/plan.hpp"

namespace dlh::plan {

// An untyped GPU request (--gpus=N, --gres=gpu:N, kept as the user gave it) lets Slurm start
// the job on any type with that many GPUs, while the plan (its time limit, its batch) is the
// planned type's: 2026-12-07, planned on alpha with an 8-minute limit, it ran on beta, whose
// band reached 18m48s. Where the live state shows the planned type's Slurm feature and other
// GPU types the request could land on, the job is kept to the type with --constraint (unless
// the user set one); where no node shows that feature, the line warns instead.
void PinUntypedGpus(const UserRequest& user, const Cluster& cluster,
                    const std::vector<LiveNode>& live, const std::string& live_error,
                    PlanOutcome* out);

}  // namespace dlh::plan
