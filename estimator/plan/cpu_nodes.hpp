// DLH planning core — CPU node types in the pool (issue 46): what the plan does differently
// when a type's "GPUs" are CPU engine ranks (GpuType::cpu, NodeType::cpu).
//   - types= names CPU node types as it names GPU types, and two words stand for groups
//     (estimator/cluster/cluster.hpp, ResolveTypeNames).
//   - A job whose user asked for GPUs (--gres, --gpus*) is planned on GPU types only.
//   - The Slurm request of a CPU part: no --gres; --nodes, --ntasks-per-node (ranks),
//     --cpus-per-task (threads per rank) and --constraint=FEATURE, which keeps the job on
//     those nodes (without GPUs requested, any node would do).
//   - When the plan puts a job on CPU nodes, it says why: the least energy meeting the
//     deadline against the best GPU plan, or no GPU free now meets it, or types= allows none.
#pragma once

#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::plan {

struct UserRequest;
struct SlurmSetting;

// The GPU types (not CPU node types) among `allowed` (empty: every type of the cluster).
std::vector<std::string> GpuTypesOnly(const std::vector<std::string>& allowed,
                                      const Cluster& cluster);

bool IsCpuPlan(const Allocation& a);

// A CPU plan's Slurm options (see above); each one the user set is kept as theirs.
std::vector<SlurmSetting> CpuSlurmSettings(const Allocation& a, const std::string& time_limit,
                                           const UserRequest& user, const Cluster& cluster);

// Why a CPU plan and not a GPU one, given the job, the cluster with live availability
// overlaid (`now`) and the chosen allocation: one clause for the summary line.
std::string CpuChoiceNote(const Job& job, const Cluster& now, const Allocation& chosen);

}  // namespace dlh::plan
