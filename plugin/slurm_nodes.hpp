// DLH SPANK plugin — the nodes' state, read from slurmctld inside sbatch/salloc/srun. The
// planning core (estimator/plan/live_state.hpp) parses and counts it; only this read is
// SPANK-specific: slurm_load_node() is resolved with dlsym(RTLD_DEFAULT), because the plugin
// runs in processes that have libslurmfull loaded, so the .so needs no link to a Slurm library
// (two copies of Slurm's internals in one process would not share slurm_conf).
#pragma once

#include <string>
#include <vector>

#include "estimator/plan/live_state.hpp"

namespace dlh::plugin {

// Reads every node from slurmctld. False with `error` set ("slurm_load_node not available
// in this process", or Slurm's error string) when the state cannot be read.
bool LoadLiveNodes(std::vector<plan::LiveNode>* nodes, std::string* error);

}  // namespace dlh::plugin
