// DLH — NCCL and MPI gradient allreduce on the GPU (see gpu_allreduce.hpp).
#include "launcher/engine/cuda/gpu_allreduce.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/planner.hpp"
#include "launcher/engine/gpu_assignment.hpp"
#include "launcher/watch/peer_watch.hpp"

namespace dlh {
namespace cuda {
namespace {

constexpr std::chrono::milliseconds kSpinWait(2);  // GpuGradientSync::wait's first phase

// How long this rank waits for a collective before aborting it itself. Under the launcher's
// peer watch, past its verdict: the watch gives a live but busy peer up to four timeouts and
// then two heartbeats, and only it can name the rank that stopped.
double WaitDeadline(double timeout_s, bool peer_watch) {
  return peer_watch ? 5 * timeout_s + 30 : timeout_s;
}

}  // namespace

NcclComm::NcclComm(MPI_Comm comm, double deadline_s) : deadline_s_(deadline_s) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm));
  // Every rank has the id before any enters NCCL's initialisation: with Mellanox HCOLL a
  // broadcast still completing on one rank while its peers sit in ncclCommInitRank's own
  // bootstrap is a known deadlock, and the barrier costs once per communicator.
  MPI_CHECK(MPI_Barrier(comm));
  // Non-blocking: a peer that never joins (dead, stopped, unreachable) cannot hang this rank
  // inside NCCL's bootstrap; settle() polls under the deadline and aborts.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&c, size_, id, rank_, &config);
  comm_ = PeerComm<NcclOps>(c);
  if (started != ncclInProgress) NCCL_CHECK(started);
  settle("ncclCommInitRankConfig (joining the NCCL communicator)");
}

void NcclComm::settle(const char* what) {
  using Clock = std::chrono::steady_clock;
  PeerWait watched(what);
  const auto deadline = Clock::now() + std::chrono::duration<double>(deadline_s_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      comm_.abort();
      throw GpuCommError(std::string(what) + ": NCCL reports " + ncclGetErrorString(state) +
                         " (a peer rank failed?); communicator aborted");
    }
    if (Clock::now() > deadline) {
      comm_.abort();
      throw GpuCommError(std::string(what) + " did not finish within " +
                         std::to_string(int(deadline_s_)) +
                         " s: a peer rank failed or stalled; communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void NcclComm::enqueued(ncclResult_t result, const char* call) {
  if (result == ncclInProgress)
    settle(call);
  else
    NCCL_CHECK(result);
}

GpuGradientSync::GpuGradientSync(MPI_Comm comm, const std::vector<std::string>& node_of_rank,
                                 const std::string& kind, float* grads, size_t grads_count,
                                 std::vector<GradBucket> buckets, bool overlap,
                                 cudaStream_t compute, double timeout_s, bool peer_watch)
    : nodes_(BuildNodeComms(comm, node_of_rank)),
      grads_(grads),
      grads_count_(grads_count),
      buckets_(std::move(buckets)),
      overlap_(overlap),
      compute_(compute),
      comm_stream_(MakeStream()),
      done_(MakeEvent()),
      timeout_s_(timeout_s),
      deadline_s_(WaitDeadline(timeout_s, peer_watch)) {
  CheckAllreduceKind(kind);
  hierarchical_ = GpuUsesHierarchical(kind);
  if (hierarchical_) {
    local_ = std::make_unique<NcclComm>(nodes_.local.get(), deadline_s_);
    host_.resize(grads_count_);
  } else {
    flat_ = std::make_unique<NcclComm>(comm, deadline_s_);
  }
  for (size_t i = 0; i < buckets_.size(); ++i) ready_.push_back(MakeEvent());
}

GpuGradientSync::~GpuGradientSync() {
  if (Unwinding()) {
    // An error path: a peer may be stalled or gone, so a queued collective may never end.
    // Aborting kills it, and only then may anything wait on the device (the engine's
    // stream synchronisation, cudaFree) without hanging the rank before MPI_Abort.
    if (flat_) flat_->abort();
    if (local_) local_->abort();
  }
  // Nothing may still write into gradients the engine is about to free.
  if (comm_stream_.get()) cudaStreamSynchronize(comm_stream_.get());
}

std::string GpuGradientSync::name() const {
  if (hierarchical_)
    return "hierarchical (" + DescribeTopology(nodes_.topo) +
           "; NCCL in the node, MPI across nodes)";
  return "flat (NCCL over " + std::to_string(flat_->size()) + " ranks" +
         (nodes_.topo.num_nodes > 1 ? ", " + DescribeTopology(nodes_.topo) : std::string()) + ")";
}

void GpuGradientSync::fail(const std::string& why) {
  if (flat_) flat_->abort();
  if (local_) local_->abort();
  throw GpuCommError(why);
}

void GpuGradientSync::wait(cudaEvent_t event, const char* what, bool on_peers) {
  using Clock = std::chrono::steady_clock;
  if (cudaEventQuery(event) == cudaSuccess) return;  // done: no watch, no clock
  std::optional<PeerWait> watched;
  if (on_peers) watched.emplace(what);
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::duration<double>(deadline_s_);
  std::chrono::microseconds poll(20);
  for (;;) {
    cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) CUDA_CHECK(e);
    for (NcclComm* c : {flat_.get(), local_.get()}) {
      if (c == nullptr || c->get() == nullptr) continue;
      ncclResult_t async = ncclSuccess;
      NCCL_CHECK(ncclCommGetAsyncError(c->get(), &async));
      if (async != ncclSuccess && async != ncclInProgress)
        fail(std::string(what) + ": NCCL reports " + ncclGetErrorString(async) +
             " (a peer rank failed?); communicators aborted");
    }
    if (Clock::now() > deadline)
      fail(std::string(what) + " did not finish within " + std::to_string(int(deadline_s_)) +
           " s (--comm-timeout " + std::to_string(int(timeout_s_)) +
           "): a peer rank failed or stalled; NCCL communicators aborted");
    // A step's own wait (backward, the gradients' tail) is caught as it ends: for its first
    // 2 ms the host only yields, since the shortest sleep Linux gives is about 60 us, a
    // twentieth of a small model's step. A longer wait (a slow peer) backs off, so that the
    // polling thread does not take a core from the data loader.
    if (Clock::now() - started < kSpinWait) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(poll);
    poll = std::min(poll * 2, std::chrono::microseconds(500));
  }
}

void GpuGradientSync::launch_flat(const GradBucket& b) {
  const size_t index = size_t(&b - buckets_.data());
  CUDA_CHECK(cudaEventRecord(ready_[index].get(), compute_));
  CUDA_CHECK(cudaStreamWaitEvent(comm_stream_.get(), ready_[index].get(), 0));
  float* data = grads_ + b.offset;
  flat_->enqueued(
      ncclAllReduce(data, data, b.count, ncclFloat, ncclSum, flat_->get(), comm_stream_.get()),
      "ncclAllReduce (gradient bucket)");
}

void GpuGradientSync::layer_done(size_t layer) {
  if (hierarchical_ || !overlap_) return;
  while (next_ < buckets_.size() && buckets_[next_].min_layer >= layer)
    launch_flat(buckets_[next_++]);
}

void GpuGradientSync::cross_sum_on_host(float* data, size_t count, MPI_Comm cross) {
  if (count == 0) return;
  int cross_size = 1;
  MPI_CHECK(MPI_Comm_size(cross, &cross_size));
  if (cross_size == 1) return;
  float* host = host_.get();
  CUDA_CHECK(cudaMemcpyAsync(host, data, count * sizeof(float), cudaMemcpyDeviceToHost,
                             comm_stream_.get()));
  CUDA_CHECK(cudaEventRecord(done_.get(), comm_stream_.get()));
  wait(done_.get(), "gradient allreduce (node-local step)");
  // MPI takes int counts: large shards go in slices. MPI_CHECK times each slice with the
  // launcher's peer watch (forwarded into this backend), so a stalled node ends the job.
  constexpr size_t kSlice = size_t(1) << 30;
  for (size_t at = 0; at < count; at += kSlice)
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, host + at, int(std::min(kSlice, count - at)), MPI_FLOAT,
                            MPI_SUM, cross));
  CUDA_CHECK(cudaMemcpyAsync(data, host, count * sizeof(float), cudaMemcpyHostToDevice,
                             comm_stream_.get()));
}

void GpuGradientSync::hierarchical_sum(float* data, size_t count) {
  const Topology& t = nodes_.topo;
  NcclComm& node = *local_;
  ncclComm_t local = node.get();
  cudaStream_t s = comm_stream_.get();
  if (!t.homogeneous) {
    // Root path: the node's sum at local rank 0, summed across the nodes' roots (the cross
    // communicator of local rank 0 holds exactly one root per node), then broadcast.
    node.enqueued(ncclReduce(data, data, count, ncclFloat, ncclSum, 0, local, s), "ncclReduce");
    if (t.local_rank == 0) cross_sum_on_host(data, count, nodes_.cross.get());
    node.enqueued(ncclBroadcast(data, data, count, ncclFloat, 0, local, s), "ncclBroadcast");
    return;
  }
  // The plan HierarchicalAllreducer::allreduce runs with MPI (planner.hpp): NCCL's
  // reduce-scatter and all-gather need the equal shards, the tail is summed whole.
  const ShardPlan plan = PlanShards(count, t.local_size);
  if (plan.shard > 0) {
    // In place: NCCL writes local rank k's shard at data + k * shard, ShardOf's offset.
    float* mine = data + ShardOf(plan, t.local_rank).offset;
    node.enqueued(
        ncclReduceScatter(data + plan.body.offset, mine, plan.shard, ncclFloat, ncclSum, local, s),
        "ncclReduceScatter");
    cross_sum_on_host(mine, plan.shard, nodes_.cross.get());
    node.enqueued(ncclAllGather(mine, data + plan.body.offset, plan.shard, ncclFloat, local, s),
                  "ncclAllGather");
  }
  if (plan.tail.count > 0) {
    float* tail = data + plan.tail.offset;
    node.enqueued(ncclAllReduce(tail, tail, plan.tail.count, ncclFloat, ncclSum, local, s),
                  "ncclAllReduce (tail)");
    cross_sum_on_host(tail, plan.tail.count, nodes_.cross.get());
  }
}

double GpuGradientSync::finish() {
  const auto start = std::chrono::steady_clock::now();
  if (hierarchical_) {
    CUDA_CHECK(cudaEventRecord(done_.get(), compute_));
    CUDA_CHECK(cudaStreamWaitEvent(comm_stream_.get(), done_.get(), 0));
    // One range for the whole gradient: the cross-node step then moves each element once.
    hierarchical_sum(grads_, grads_count_);
  } else {
    while (next_ < buckets_.size()) launch_flat(buckets_[next_++]);
  }
  next_ = 0;
  CUDA_CHECK(cudaEventRecord(done_.get(), comm_stream_.get()));
  wait(done_.get(), "gradient allreduce");
  CUDA_CHECK(cudaStreamWaitEvent(compute_, done_.get(), 0));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace cuda
}  // namespace dlh
