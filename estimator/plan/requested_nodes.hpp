// DLH planning core — the nodes a user's request names: --nodelist (-w) and --exclude (-x).
//
// Before, the plan ignored both (2026-12-07): `sbatch --dlh-auto -w node-beta` was planned on
// alpha, with alpha's GPUs and time limit, and Slurm refused the job ("Requested node
// configuration is not available"); `-x node-alpha` on a cluster of one alpha node was
// planned on that node and waited for ever. Now an excluded node is no node of the cluster
// for this job, and the listed nodes fix its node type and, without --nodes, its node count
// (sbatch gives a job as many nodes as -w lists).
#pragma once

#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/plan/live_state.hpp"
#include "estimator/plan/plan.hpp"

namespace dlh::plan {

// Applies the user's --exclude and --nodelist (UserRequest::exclude, ::nodelist) to the
// plan's view of the cluster:
//   - each excluded node leaves `live` and its node type's node count;
//   - the listed nodes' types go to user->nodelist_types (the plan is kept to them:
//     TypesOfNodelist) and, without --nodes and unless `mixed`, their count to user->nodes
//     (user->nodes_from_nodelist), so that the plan has exactly those nodes.
// Node names come from the live node state: without it (`live_error`) only the count is used,
// and the returned note says so. A name the cluster does not have, nodes listed and excluded
// at once, or listed nodes of two types without `mixed` throw UsageError naming the option.
// A value with '/' is a file of node names, which Slurm reads and the plan does not.
// Returns "" or a note for the summary ("your --exclude=node-a2: alpha 3 nodes, not 4").
std::string ApplyRequestedNodes(UserRequest* user, Cluster* cluster, std::vector<LiveNode>* live,
                                const std::string& live_error, bool mixed);

// `allowed` (empty: every type) narrowed to user.nodelist_types (empty: unchanged). Throws
// UsageError when none of them is allowed.
std::vector<std::string> TypesOfNodelist(const UserRequest& user,
                                         const std::vector<std::string>& allowed);

}  // namespace dlh::plan
