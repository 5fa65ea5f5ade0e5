// DLH planning core — the GPU types a user's request allows: a --constraint naming a node
// type's feature, and an untyped GPU request kept to the planned type (see plan.hpp).
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

// A --constraint that is exactly the feature of node types of the cluster keeps the plan to
// their types: planned on another, the job asked for nodes that no node is, and sbatch
// refused it ("Requested node configuration is not available"). Returns `allowed` narrowed to
// them (`allowed` empty: every type); any other constraint is Slurm's alone and changes
// nothing. Throws UsageError when `allowed` holds none of them.
std::vector<std::string> TypesOfConstraint(const UserRequest& user, const Cluster& cluster,
                                           const std::vector<std::string>& allowed);

// The user's --nodes, GPUs per node and GPU count must fit one node type of `allowed`
// (empty: any), or the plan would describe another shape than the job gets: 2026-12-07,
// -N 2 on a cluster of one node per type got gres:gpu:alpha:2 added and was queued, then
// failed (BadConstraints). Throws UsageError naming what each node type has. A mix (`mixed`)
// spans types: not checked here.
void CheckUserShapeFits(const UserRequest& user, const Cluster& cluster,
                        const std::vector<std::string>& allowed);

}  // namespace dlh::plan
