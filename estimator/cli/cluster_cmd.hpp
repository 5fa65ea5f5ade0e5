// DLH — `dlh-estimate cluster --from-slurm`: a cluster description drafted from live Slurm
// state (sinfo) and built-in GPU datasheets (estimator/cluster/cluster_from_slurm.hpp).
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Runs `timeout 30 sinfo -h -N -O ...` (or reads --sinfo FILE), drafts the description and
// writes it to --out FILE (atomically) or stdout; a summary and one line per problem go to
// stderr. Exit codes: 0 written; 1 sinfo failed; 2 bad option; 3 (kExitIncomplete) a node
// with GPUs is missing from what was written (unknown GPU type without
// --allow-placeholders, untyped GPUs, mixed GPU types), or nothing could be written.
int ClusterCommand(const std::vector<std::string>& args);

}  // namespace dlh
