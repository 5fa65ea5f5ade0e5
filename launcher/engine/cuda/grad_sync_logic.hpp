// DLH — the GPU gradient allreduce's logic, generic over the device, so that the very code the
// CUDA engine runs (Device = CudaDevice, gpu_allreduce.hpp) is tested in make check on host
// memory (Device = a host fake whose streams are threads, with the NCCL stand-in:
// tests/nccl_standin/). Two algorithms, behind --allreduce:
//
//   flat          ncclAllReduce over all ranks, one call per fused bucket, each launched on
//                 the communication stream as soon as backward has written the bucket's
//                 gradients (an event orders it after them), so it overlaps the rest of
//                 backward. auto's choice at any node count: NCCL's own rings and trees use
//                 NVLink inside a node and the network across nodes.
//   hierarchical  Horovod's scheme, pipelined bucket by bucket and overlapped with backward:
//                 NCCL reduce-scatter inside the node, MPI allreduce of each rank's shard
//                 across nodes on pinned host memory, NCCL all-gather inside the node.
//                 Elements beyond a multiple of the node's rank count (the tail) are summed by
//                 an NCCL allreduce in the node and MPI across nodes (PlanShards, the CPU
//                 path's plan); nodes with different rank counts take the root path (NCCL
//                 reduce to local rank 0, MPI among the nodes' roots, NCCL broadcast).
//
// The hierarchical pipeline, per bucket and always in bucket order:
//   1. launch   (as backward writes the bucket) reduce-scatter and tail allreduce on the
//               reduce stream, then the shard and tail copied to host staging;
//   2. cross    (once that copy is done) MPI_Iallreduce of the staged shard and tail among
//               the ranks with this local rank, one per node;
//   3. return   (once MPI is done) copied back on the gather stream, then all-gather.
// Stages 2 and 3 advance on the main thread (MPI is funnelled there) whenever backward
// finishes a layer, and in finish(). The reduce-scatters and the all-gathers go through two
// NCCL communicators over the same ranks: NCCL requires every rank to issue a
// communicator's collectives in one order, and when a bucket's all-gather is issued depends
// on MPI's timing on each rank, while each kind alone is issued in bucket order everywhere.
//
// A stalled or failed peer never hangs the job: see nccl_comm.hpp. Every wait here polls the
// device, NCCL's asynchronous errors and MPI under a deadline, inside a PeerWait.
//
// Device provides (see CudaDevice for the real one):
//   types   Stream, Event (owners, .get() gives StreamRef, EventRef), HostArray<float>
//           (.resize(n), .get(): host staging the device copies to and from)
//   Stream make_stream(); Event make_event();
//   void record(EventRef, StreamRef);       the event completes when the stream gets there
//   void wait_event(StreamRef, EventRef);   the stream waits for the event
//   bool query(EventRef);                   completed (throws on a device error)
//   void to_host(float*, const float*, size_t, StreamRef); to_device(...) likewise
//   void synchronize(StreamRef);            never throws
//   ncclResult_t all_reduce(const float*, float*, size_t, ncclComm_t, StreamRef), and
//   reduce_scatter, all_gather (NCCL's counts), reduce(..., int root, ...), broadcast(...)
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/peer_comm.hpp"
#include "launcher/comm/planner.hpp"
#include "launcher/comm/topology.hpp"
#include "launcher/engine/cuda/nccl_comm.hpp"
#include "launcher/engine/gpu_assignment.hpp"
#include "launcher/watch/peer_watch.hpp"

namespace dlh {
namespace cuda {

// One fused bucket: a contiguous range of the flat gradient array, complete once backward
// has finished layer `min_layer`.
struct GradBucket {
  size_t offset = 0;
  size_t count = 0;
  size_t min_layer = 0;
};

// How long this rank waits for a collective before aborting it itself. Under the launcher's
// peer watch, past its verdict: the watch gives a live but busy peer up to four timeouts and
// then two heartbeats, and only it can name the rank that stopped.
inline double WaitDeadline(double timeout_s, bool peer_watch) {
  return peer_watch ? 5 * timeout_s + 30 : timeout_s;
}

template <class Device>
class GradSyncLogic {
 public:
  using StreamRef = typename Device::StreamRef;
  using EventRef = typename Device::EventRef;

  // Collective over `comm`. `grads` is the flat gradient array (device), written on
  // `compute`. `kind` is auto, flat or hierarchical. `timeout_s` is --comm-timeout;
  // `peer_watch`: the launcher's peer watch times this rank's waits (then the engine's own
  // deadline comes later, so that the watch names the rank that stopped).
  GradSyncLogic(MPI_Comm comm, const std::vector<std::string>& node_of_rank,
                const std::string& kind, float* grads, size_t grads_count,
                std::vector<GradBucket> buckets, bool overlap, StreamRef compute, double timeout_s,
                bool peer_watch, Device device = Device())
      : dev_(std::move(device)),
        nodes_(BuildNodeComms(comm, node_of_rank)),
        grads_(grads),
        grads_count_(grads_count),
        buckets_(std::move(buckets)),
        overlap_(overlap),
        compute_(compute),
        timeout_s_(timeout_s),
        deadline_s_(WaitDeadline(timeout_s, peer_watch)) {
    CheckAllreduceKind(kind);
    hierarchical_ = GpuUsesHierarchical(kind);
    chosen_by_auto_ = kind == "auto";
    streams_.push_back(dev_.make_stream());
    if (hierarchical_) {
      streams_.push_back(dev_.make_stream());  // the gather stream
      scatter_ = std::make_unique<NcclComm>(nodes_.local.get(), deadline_s_);
      gather_ = std::make_unique<NcclComm>(nodes_.local.get(), deadline_s_);
      MPI_CHECK(MPI_Comm_size(nodes_.cross.get(), &cross_size_));
      host_.resize(grads_count_);
      requests_.resize(buckets_.size());
      for (size_t i = 0; i < buckets_.size(); ++i) cross_.push_back(cross_ranges(buckets_[i]));
    } else {
      flat_ = std::make_unique<NcclComm>(comm, deadline_s_);
    }
    for (size_t i = 0; i < buckets_.size(); ++i) {
      ready_.push_back(dev_.make_event());
      staged_.push_back(dev_.make_event());
    }
    done_ = dev_.make_event();
  }

  ~GradSyncLogic() {
    if (Unwinding()) abort_all();  // see nccl_comm.hpp: never wait on an aborted peer
    // Nothing may still write into gradients the engine is about to free.
    for (auto& s : streams_) dev_.synchronize(s.get());
  }
  GradSyncLogic(const GradSyncLogic&) = delete;
  GradSyncLogic& operator=(const GradSyncLogic&) = delete;

  std::string name() const {
    if (hierarchical_)
      return "hierarchical (" + DescribeTopology(nodes_.topo) +
             "; NCCL in the node, MPI across nodes, pipelined per bucket)";
    // Why auto is flat across nodes: BENCHMARKS.md, "On paper" (dlh-estimate scaling).
    const bool across = nodes_.topo.num_nodes > 1;
    return "flat (NCCL over " + std::to_string(flat_->size()) + " ranks" +
           (across ? ", " + DescribeTopology(nodes_.topo) : std::string()) +
           (across && chosen_by_auto_
                ? "; auto: NCCL's rings and trees cross the nodes without staging through the "
                  "host, ahead of the hybrid wherever bandwidth rules"
                : std::string()) +
           ")";
  }

  // Backward has written layer `layer`'s gradients (on the compute stream).
  void layer_done(size_t layer) {
    if (!overlap_) return;
    while (launched_ < buckets_.size() && buckets_[launched_].min_layer >= layer)
      launch(launched_++);
    if (hierarchical_) advance();
  }

  // Enqueues what is left, waits until every gradient is the global sum and orders the
  // compute stream after it. Returns the seconds the host waited here.
  double finish() {
    const auto start = std::chrono::steady_clock::now();
    while (launched_ < buckets_.size()) launch(launched_++);
    if (hierarchical_) drain();
    launched_ = crossed_ = returned_ = 0;
    for (auto& s : streams_) {
      dev_.record(done_.get(), s.get());
      wait(done_.get(), "gradient allreduce");
    }
    // A collective that failed may still let its stream go on: its gradients are not sums.
    check_comms("gradient allreduce");
    dev_.record(done_.get(), streams_.back().get());
    dev_.wait_event(compute_, done_.get());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Waits for `event` under the deadline and NCCL's asynchronous errors (also used for the
  // compute stream's own waits). `on_peers`: the wait depends on other ranks (a collective),
  // and the launcher's peer watch times it as it times an MPI call.
  void wait(EventRef event, const char* what, bool on_peers = true) {
    if (dev_.query(event)) return;  // done: no watch, no clock
    std::optional<PeerWait> watched;
    if (on_peers) watched.emplace(what);
    Poller poll(*this, what);
    while (!dev_.query(event)) poll.pause();
  }

 private:
  // The polling of a wait: NCCL's asynchronous errors, the deadline, then a pause. For its
  // first 2 ms the host only yields (a step's own wait is caught as it ends; the shortest
  // sleep Linux gives is about 60 us, a twentieth of a small model's step); a longer wait (a
  // slow peer) backs off to 500 us, so that it does not take a core from the data loader.
  class Poller {
   public:
    Poller(GradSyncLogic& sync, const char* what) : sync_(sync), what_(what) {}
    void pause() {
      sync_.check_comms(what_);
      const auto now = Clock::now();
      if (now - started_ > std::chrono::duration<double>(sync_.deadline_s_))
        sync_.fail(std::string(what_) + " did not finish within " +
                   std::to_string(int(sync_.deadline_s_)) + " s (--comm-timeout " +
                   std::to_string(int(sync_.timeout_s_)) +
                   "): a peer rank failed or stalled; NCCL communicators aborted");
      if (now - started_ < std::chrono::milliseconds(2)) {
        std::this_thread::yield();
        return;
      }
      std::this_thread::sleep_for(sleep_);
      sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(500));
    }

   private:
    using Clock = std::chrono::steady_clock;
    GradSyncLogic& sync_;
    const char* what_;
    Clock::time_point started_ = Clock::now();
    std::chrono::microseconds sleep_{20};
  };

  // Fails on any error NCCL reports for this rank's communicators.
  void check_comms(const char* what) {
    for (NcclComm* c : {flat_.get(), scatter_.get(), gather_.get()}) {
      if (c == nullptr) continue;
      if (const std::string problem = NcclAsyncProblem(c->get()); !problem.empty())
        fail(std::string(what) + ": NCCL reports " + problem +
             " (a peer rank failed?); communicators aborted");
    }
  }

  void abort_all() {
    for (auto* c : {flat_.get(), scatter_.get(), gather_.get()})
      if (c) c->abort();
  }
  [[noreturn]] void fail(const std::string& why) {
    abort_all();
    throw GpuCommError(why);
  }

  StreamRef reduce_stream() const { return streams_.front().get(); }
  StreamRef gather_stream() const { return streams_.back().get(); }

  // Stage 1: after backward wrote bucket `i`.
  void launch(size_t i) {
    const GradBucket& b = buckets_[i];
    dev_.record(ready_[i].get(), compute_);
    dev_.wait_event(reduce_stream(), ready_[i].get());
    float* data = grads_ + b.offset;
    if (!hierarchical_) {
      flat_->enqueued(dev_.all_reduce(data, data, b.count, flat_->get(), reduce_stream()),
                      "ncclAllReduce (gradient bucket)");
      return;
    }
    const Topology& t = nodes_.topo;
    const StreamRef s = reduce_stream();
    if (!t.homogeneous) {
      // Root path: the node's sum at local rank 0, summed across the nodes' roots (the cross
      // communicator of local rank 0 holds exactly one root per node), then broadcast.
      scatter_->enqueued(dev_.reduce(data, data, b.count, 0, scatter_->get(), s), "ncclReduce");
    } else {
      const ShardPlan plan = PlanShards(b.count, t.local_size);
      if (plan.shard > 0) {
        // In place: NCCL writes local rank k's shard at its ShardOf offset.
        const ElementRange mine = ShardOf(plan, t.local_rank);
        scatter_->enqueued(dev_.reduce_scatter(data + plan.body.offset, data + mine.offset,
                                               plan.shard, scatter_->get(), s),
                           "ncclReduceScatter");
      }
      if (plan.tail.count > 0) {
        float* tail = data + plan.tail.offset;
        scatter_->enqueued(dev_.all_reduce(tail, tail, plan.tail.count, scatter_->get(), s),
                           "ncclAllReduce (tail)");
      }
    }
    // What this rank sums across nodes, to pinned host memory.
    for (const ElementRange& r : cross_[i])
      dev_.to_host(host_.get() + r.offset, grads_ + r.offset, r.count, s);
    dev_.record(staged_[i].get(), s);
  }

  // The ranges of bucket `b` this rank sums across nodes: its shard and the tail, or (root
  // path) the whole bucket at local rank 0; none on one node. Fixed per bucket, so they are
  // planned once, when the sync is built (cross_).
  std::vector<ElementRange> cross_ranges(const GradBucket& b) const {
    const Topology& t = nodes_.topo;
    std::vector<ElementRange> out;
    if (cross_size_ <= 1) return out;
    if (!t.homogeneous) {
      if (t.local_rank == 0 && b.count > 0) out.push_back({b.offset, b.count});
      return out;
    }
    const ShardPlan plan = PlanShards(b.count, t.local_size);
    if (plan.shard > 0) {
      const ElementRange mine = ShardOf(plan, t.local_rank);
      out.push_back({b.offset + mine.offset, plan.shard});
    }
    if (plan.tail.count > 0) out.push_back({b.offset + plan.tail.offset, plan.tail.count});
    return out;
  }

  // Stages 2 and 3 for whatever is ready, in bucket order. Returns whether anything moved.
  bool advance() {
    bool moved = false;
    // 2: start MPI for buckets whose staging copy is done.
    while (crossed_ < launched_ && dev_.query(staged_[crossed_].get())) {
      std::vector<MPI_Request>& reqs = requests_[crossed_];
      reqs.clear();
      // MPI takes int counts: large ranges go in slices.
      constexpr size_t kSlice = size_t(1) << 30;
      for (const ElementRange& r : cross_[crossed_])
        for (size_t at = 0; at < r.count; at += kSlice) {
          reqs.emplace_back();
          MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, host_.get() + r.offset + at,
                                   int(std::min(kSlice, r.count - at)), MPI_FLOAT, MPI_SUM,
                                   nodes_.cross.get(), &reqs.back()));
        }
      ++crossed_;
      moved = true;
    }
    // 3: bring back and gather the buckets MPI has summed.
    while (returned_ < crossed_) {
      std::vector<MPI_Request>& reqs = requests_[returned_];
      int complete = 1;
      if (!reqs.empty())
        MPI_CHECK(MPI_Testall(int(reqs.size()), reqs.data(), &complete, MPI_STATUSES_IGNORE));
      if (!complete) break;
      give_back(returned_++);
      moved = true;
    }
    return moved;
  }

  void give_back(size_t i) {
    const GradBucket& b = buckets_[i];
    const Topology& t = nodes_.topo;
    const StreamRef s = gather_stream();
    // The gather stream writes what the reduce stream wrote: after it.
    dev_.wait_event(s, staged_[i].get());
    for (const ElementRange& r : cross_[i])
      dev_.to_device(grads_ + r.offset, host_.get() + r.offset, r.count, s);
    float* data = grads_ + b.offset;
    if (!t.homogeneous) {
      gather_->enqueued(dev_.broadcast(data, data, b.count, 0, gather_->get(), s), "ncclBroadcast");
      return;
    }
    const ShardPlan plan = PlanShards(b.count, t.local_size);
    if (plan.shard > 0) {
      const ElementRange mine = ShardOf(plan, t.local_rank);
      gather_->enqueued(dev_.all_gather(data + mine.offset, data + plan.body.offset, plan.shard,
                                        gather_->get(), s),
                        "ncclAllGather");
    }
  }

  // Every bucket through stage 3, under the deadline.
  void drain() {
    if (returned_ == buckets_.size()) return;
    PeerWait watched("gradient allreduce (hierarchical: MPI across nodes)");
    Poller poll(*this, "gradient allreduce (hierarchical)");
    while (returned_ < buckets_.size())
      if (!advance()) poll.pause();
  }

  Device dev_;
  NodeComms nodes_;
  bool hierarchical_ = false;
  bool chosen_by_auto_ = false;  // --allreduce auto (name() says why flat)
  int cross_size_ = 1;
  std::unique_ptr<NcclComm> flat_, scatter_, gather_;
  float* grads_;
  size_t grads_count_;
  std::vector<GradBucket> buckets_;
  size_t launched_ = 0, crossed_ = 0, returned_ = 0;  // buckets past stages 1, 2 and 3
  bool overlap_;
  StreamRef compute_;
  std::vector<typename Device::Stream> streams_;  // reduce (flat: the only one), gather
  std::vector<typename Device::Event> ready_;     // per bucket, recorded on compute
  std::vector<typename Device::Event> staged_;    // per bucket, recorded on the reduce stream
  typename Device::Event done_;
  typename Device::template HostArray<float> host_;  // cross-node staging, one place per element
  std::vector<std::vector<MPI_Request>> requests_;   // per bucket, stage 2
  std::vector<std::vector<ElementRange>> cross_;     // per bucket: cross_ranges()
  double timeout_s_;                                 // --comm-timeout, what the messages quote
  double deadline_s_;  // how long a wait may last before this rank aborts
};

}  // namespace cuda
}  // namespace dlh
