// DLH — which device a rank uses, from the launcher's and Slurm's variables. A pure
// function of the environment so it can be tested without Slurm.
//
// Local rank: SLURM_LOCALID (srun), else OMPI_COMM_WORLD_LOCAL_RANK (mpirun), else the rank
// within the node's shared-memory communicator. Device: the local rank's entry of
// CUDA_VISIBLE_DEVICES when Slurm gave the step several GPUs (one rank per GPU); entry 0
// when each rank sees exactly one (gres binding per task); none without GPUs.
//
// Whether the environment gives the rank GPUs at all (Binding::gpus_given) decides whether
// --device auto says so when it trains on the CPU (launcher/engine/device.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace dlh {

struct Binding {
  int local_rank = 0;
  std::string
      local_rank_source;  // "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "node communicator"
  std::string visible;    // CUDA_VISIBLE_DEVICES as given ("" when unset)
  int device = -1;        // index into the visible devices; -1: no GPU for this rank
  // What gives this rank GPUs, as "NAME=VALUE": CUDA_VISIBLE_DEVICES listing devices, else
  // Slurm's SLURM_STEP_GPUS, SLURM_JOB_GPUS or SLURM_GPUS_ON_NODE (a gres allocation);
  // empty when nothing does.
  std::string gpus_given;
  std::string describe()
      const;  // "local rank 1 (SLURM_LOCALID), GPU 1 of CUDA_VISIBLE_DEVICES=0,1"
};

// The entries of a CUDA_VISIBLE_DEVICES value, in order ("0,,2" gives "0", "2").
std::vector<std::string> VisibleDevices(const std::string& cuda_visible_devices);

// `getenv` returns nullptr for unset variables. Throws UsageError when CUDA_VISIBLE_DEVICES
// lists GPUs but fewer than the node's ranks need ("rank 2 on this node, only 2 GPUs visible").
Binding BindRank(const std::function<const char*(const char*)>& getenv, int node_local_rank);

}  // namespace dlh
