// DLH — which physical GPU each rank trains on, checked before any engine is built.
//
// A rank's GPU is an index among the GPUs it sees: the binding's (launcher/comm/binding.hpp)
// when Slurm or CUDA_VISIBLE_DEVICES decide it, else its local rank modulo the count. Started
// by `mpirun -np 2` on a machine with one GPU, both ranks take GPU 0, and NCCL refuses a
// communicator whose ranks share a GPU: the job would die inside NCCL's initialisation with
// "Duplicate GPU detected". Each rank therefore names its GPU by PCI bus id (the same
// whatever CUDA_VISIBLE_DEVICES calls it), the ranks gather the ids, and a shared GPU is
// found before NCCL sees it: --device auto trains on the CPU, --device cuda refuses with a
// line naming the ranks. Pure functions, so they are unit-tested without MPI or a GPU.
#pragma once

#include <string>
#include <vector>

namespace dlh {

struct RankGpu {
  std::string host;  // the machine (gethostname), where a PCI bus id is unique
  std::string node;  // the allreduce's node name (SLURMD_NODENAME first; tests pretend)
  std::string gpu;   // PCI bus id
};

// The visible GPU a rank uses: `bound` when the binding chose one (>= 0), else
// `local_rank` modulo `visible_count`.
int GpuIndexFor(int bound, int local_rank, int visible_count);

// The first two ranks that would share one NCCL communicator and one GPU ("ranks 0 and 1
// on vm both use GPU 0000:3B:00.0"), or "" when every rank of a communicator has its own.
// Flat: one communicator over all ranks. Hierarchical: one per node, so ranks posing as
// two nodes on one GPU are fine (the cross-node step runs over MPI).
std::string FindSharedGpu(const std::vector<RankGpu>& ranks, bool hierarchical);

// Whether the GPU engine sums gradients hierarchically (NCCL in the node, MPI across nodes)
// for --allreduce `kind`: only when asked. Flat NCCL is the default at any node count (issue
// 42): NCCL's own rings and trees use NVLink inside a node and the network across nodes,
// overlap backward bucket by bucket, and stage nothing through the host. (The CPU path's
// auto is UseHierarchical, launcher/comm/allreduce.hpp.)
inline bool GpuUsesHierarchical(const std::string& kind) { return kind == "hierarchical"; }

// DLH_TEST_SHARE_GPU=1: ranks may share a GPU. For tests only, with the NCCL stand-in
// (tests/nccl_standin/), which runs several ranks on one GPU; NCCL itself refuses them.
bool TestSharesGpus();

}  // namespace dlh
