// DLH — each rank's share of the global batch (docs/reference/dlh-launch.md,
// "Per-rank batches").
//
// Without a plan, or with a plan of one part, the global batch B is split evenly: the first
// B mod n ranks take one sample more. A plan on two or more GPU types gives each part its
// own per_gpu_batch (the estimator balances them by speed), and every rank trains its
// part's per_gpu_batch. A rank finds its part by its GPU type: `--gpu-type`, else
// `DLH_GPU_TYPE`, else by its node's name, else by position.
//  - Node name is how the SPANK plugin's mixes reach us: one job whose nodes Slurm picks by
//    feature (--constraint=[alpha*1&beta*1]) and lists in name order, so position says
//    nothing; the plan lists each part's node_names and the rank looks up SLURMD_NODENAME.
//  - Position serves a heterogeneous job with one component per part, in the plan's order:
//    srun numbers the tasks of component 0 first, so rank r belongs to the part whose range
//    of GPU counts holds r.
// Slurm 22.05 gives a task the GRES indices of its GPUs but not their type, and a CUDA
// device name is not the Slurm type either; asking slurmctld (scontrol) from every rank
// would put a subprocess and a controller round trip into start-up. The type, when given,
// wins, so MPMD launches in any order still work.
//
// Whatever the split, the step's global batch is one contiguous range of the epoch's order
// and rank r takes the part of it after the ranks before it: offset = sum of their batches.
// Pure functions: the trainer gathers every rank's batch and calls SplitOffsets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/train/plan.hpp"

namespace dlh {

struct RankShare {
  int64_t offset = 0;  // first sample of the rank's slice within the global batch
  int64_t batch = 0;   // samples of the slice
};

// The even split of `global` over `size` ranks, rank `rank`'s slice.
RankShare EvenShare(int64_t global, int rank, int size);

// Whether the plan's per-part batches decide the split: it has two or more parts and its
// global batch is the one trained (not overridden by --batch-size).
bool PlanSplitsBatch(const LaunchPlan& plan, bool batch_overridden);

// Index into plan.parts of rank `rank`'s part. `gpu_type` (empty: not given) matches a
// part's `gpu`, else its `node_type`; `type_origin` names where it came from
// ("--gpu-type", "DLH_GPU_TYPE"). Without a type, `node_name` (SLURMD_NODENAME, empty:
// unset) decides when the plan lists node_names; else the position, which needs the plan's
// GPU count to be the rank count. Throws UsageError naming the source and field: an
// unknown or ambiguous type, a node in no part's (or several parts') node_names, or no type
// and a rank count other than the plan's.
int PartOfRank(const LaunchPlan& plan, const std::string& plan_origin, const std::string& gpu_type,
               const std::string& type_origin, const std::string& node_name, int rank, int size);

// The offsets of every rank's slice given every rank's batch and part (as gathered).
// Throws UsageError naming `plan_origin` and allocation.parts when the batches do not sum
// to `global`, saying how many ranks of each part there were.
std::vector<int64_t> SplitOffsets(const std::vector<int64_t>& batches,
                                  const std::vector<int>& part_of_rank, const LaunchPlan& plan,
                                  const std::string& plan_origin, int64_t global);

// "[96, 32]": how summaries and messages show a split.
std::string FormatBatches(const std::vector<int64_t>& batches);

}  // namespace dlh
