// DLH — gradient allreduce on the GPU, two algorithms behind --allreduce:
//
//   flat          ncclAllReduce over all ranks, one call per fused bucket, each launched on
//                 the communication stream as soon as backward has written the bucket's
//                 gradients (an event orders it after them), so it overlaps the rest of
//                 backward.
//   hierarchical  Horovod's scheme: ncclReduceScatter inside the node, MPI_Allreduce of
//                 each rank's shard across nodes on pinned host memory, ncclAllGather inside
//                 the node. Elements beyond a multiple of the local size are summed by an
//                 NCCL allreduce in the node and MPI across nodes (PlanShards in
//                 launcher/comm/planner.hpp, the plan of the CPU path); nodes with different GPU
//                 counts take the root path (ncclReduce, MPI among node roots,
//                 ncclBroadcast). The cross-node step on the host needs no CUDA-aware MPI
//                 and no NCCL between nodes, so it also runs "2 nodes x 1 GPU" on one GPU.
//
// A stalled or failed peer never hangs the job: every wait on the device polls with a
// deadline and NCCL's asynchronous error, and on either aborts the communicators and throws
// GpuCommError; the MPI calls (the host step, the id broadcast) are timed by the launcher's
// peer watch (EngineConfig::peer_wait). Communicators closed on any error path are aborted,
// never destroyed (launcher/comm/peer_comm.hpp).
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/comm/peer_comm.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/engine/cuda/resources.hpp"

namespace dlh {
namespace cuda {

// One fused bucket: a contiguous range of the flat gradient array, complete once backward
// has finished layer `min_layer`.
struct GradBucket {
  size_t offset = 0;
  size_t count = 0;
  size_t min_layer = 0;
};

// A collective that stalled or whose peer failed, seen by this rank alone: not a
// CollectiveError (the kind every rank throws alike), so that dlh-launch names the rank and
// calls MPI_Abort instead of waiting in MPI_Finalize for the stalled peer.
struct GpuCommError : Error {
  using Error::Error;
};

struct NcclOps {
  using Handle = ncclComm_t;
  static bool async_error(ncclComm_t c) {
    ncclResult_t async = ncclSuccess;
    return ncclCommGetAsyncError(c, &async) != ncclSuccess || async != ncclSuccess;
  }
  static void destroy(ncclComm_t c) { ncclCommDestroy(c); }
  static void abort(ncclComm_t c) { ncclCommAbort(c); }
};

// An NCCL communicator over the ranks of an MPI communicator (rank 0 makes the id).
class NcclComm {
 public:
  explicit NcclComm(MPI_Comm comm);
  ncclComm_t get() const { return comm_.get(); }
  int size() const { return size_; }
  int rank() const { return rank_; }
  void abort() { comm_.abort(); }  // kills queued and running operations; gone after

 private:
  PeerComm<NcclOps> comm_;
  int size_ = 0, rank_ = 0;
};

class GpuGradientSync {
 public:
  // Collective over `comm`. `grads` is the flat gradient array (device), written on
  // `compute`. `kind` is auto, flat or hierarchical.
  GpuGradientSync(MPI_Comm comm, const std::vector<std::string>& node_of_rank,
                  const std::string& kind, float* grads, size_t grads_count,
                  std::vector<GradBucket> buckets, bool overlap, cudaStream_t compute,
                  double timeout_s);
  ~GpuGradientSync();

  std::string name() const;
  // Backward has written layer `layer`'s gradients (on the compute stream).
  void layer_done(size_t layer);
  // Enqueues what is left, waits until every gradient is the global sum and orders the
  // compute stream after it. Returns the seconds the host waited here.
  double finish();
  // Waits for `event` under the watchdog (also used for the compute stream's own waits).
  void wait(cudaEvent_t event, const char* what);

 private:
  void launch_flat(const GradBucket& b);
  void hierarchical_sum(float* data, size_t count);
  void cross_sum_on_host(float* data, size_t count, MPI_Comm cross);
  [[noreturn]] void fail(const std::string& why);

  bool hierarchical_ = false;
  NodeComms nodes_;
  std::unique_ptr<NcclComm> flat_, local_;
  float* grads_;
  size_t grads_count_;
  std::vector<GradBucket> buckets_;
  size_t next_ = 0;
  bool overlap_;
  cudaStream_t compute_;
  Stream comm_stream_;
  std::vector<Event> ready_;  // one per bucket, recorded on compute
  Event done_;
  PinnedArray<float> host_;  // cross-node staging
  double timeout_s_;
};

}  // namespace cuda
}  // namespace dlh
