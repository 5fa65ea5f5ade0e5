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
// `auto` is flat at any node count (GpuUsesHierarchical, launcher/engine/gpu_assignment.hpp).
//
// A stalled or failed peer never hangs the job. The communicators are non-blocking
// (ncclCommInitRankConfig with blocking = 0, NCCL 2.14+): joining one, like every wait on the
// device, polls NCCL's asynchronous error under a deadline, and on an error or the deadline
// aborts the communicators and throws GpuCommError. NCCL 2.22+ connects lazily at the first
// collective, so a peer that dies after joining is seen by those waits too. Each wait is
// also a PeerWait: the launcher's peer watch (EngineConfig::peer_wait) times it like an MPI
// call and, past --comm-timeout, names the rank that stopped answering from the ranks'
// heartbeats and ends the job; the engine's own deadline is then a backstop beyond the
// watch's. The MPI calls (the host step, the id broadcast) are timed by the same watch.
// Communicators closed on any error path are aborted, never destroyed
// (launcher/comm/peer_comm.hpp).
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
    // A non-blocking communicator still at work (ncclInProgress) has not failed.
    return ncclCommGetAsyncError(c, &async) != ncclSuccess ||
           (async != ncclSuccess && async != ncclInProgress);
  }
  static void destroy(ncclComm_t c) { ncclCommDestroy(c); }
  static void abort(ncclComm_t c) { ncclCommAbort(c); }
};

// A non-blocking NCCL communicator over the ranks of an MPI communicator (rank 0 makes the
// id). Joining it waits at most `deadline_s`; a failure or the deadline aborts it and throws
// GpuCommError.
class NcclComm {
 public:
  NcclComm(MPI_Comm comm, double deadline_s);
  ncclComm_t get() const { return comm_.get(); }
  int size() const { return size_; }
  int rank() const { return rank_; }
  void abort() { comm_.abort(); }  // kills queued and running operations; gone after
  // The result of enqueueing a collective: on a non-blocking communicator it may be
  // ncclInProgress, and nothing else may be enqueued until NCCL has finished enqueueing it.
  void enqueued(ncclResult_t result, const char* call);

 private:
  // Polls the asynchronous error until NCCL is no longer in progress (PeerWait `what`).
  void settle(const char* what);
  PeerComm<NcclOps> comm_;
  int size_ = 0, rank_ = 0;
  double deadline_s_;
};

class GpuGradientSync {
 public:
  // Collective over `comm`. `grads` is the flat gradient array (device), written on
  // `compute`. `kind` is auto, flat or hierarchical. `timeout_s` is --comm-timeout;
  // `peer_watch`: the launcher's peer watch times this rank's waits (then the engine's own
  // deadline comes later, so that the watch names the rank that stopped).
  GpuGradientSync(MPI_Comm comm, const std::vector<std::string>& node_of_rank,
                  const std::string& kind, float* grads, size_t grads_count,
                  std::vector<GradBucket> buckets, bool overlap, cudaStream_t compute,
                  double timeout_s, bool peer_watch);
  ~GpuGradientSync();

  std::string name() const;
  // Backward has written layer `layer`'s gradients (on the compute stream).
  void layer_done(size_t layer);
  // Enqueues what is left, waits until every gradient is the global sum and orders the
  // compute stream after it. Returns the seconds the host waited here.
  double finish();
  // Waits for `event` under the deadline and NCCL's asynchronous errors (also used for the
  // compute stream's own waits). `on_peers`: the wait depends on other ranks (a collective),
  // and the launcher's peer watch times it as it times an MPI call.
  void wait(cudaEvent_t event, const char* what, bool on_peers = true);

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
  double timeout_s_;         // --comm-timeout, what the messages quote
  double deadline_s_;        // how long a wait may last before this rank aborts
};

}  // namespace cuda
}  // namespace dlh
