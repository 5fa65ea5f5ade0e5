// DLH — gradient synchronisation: parameters are grouped into fused buckets (in the
// order backward produces them, last layer first: PlanBuckets in planner.hpp, the rule the
// CUDA engine uses too) and each bucket is summed across
// ranks with one non-blocking MPI_Iallreduce as soon as all its gradients exist, so
// communication overlaps the rest of backward. One call per bucket, not per tensor:
// small tensors would otherwise pay MPI's per-call latency many times.
//
// The gradients live in one flat array, in forward order and packed tight (as on the GPU):
// the constructor makes every gradient tensor a view of its place in it
// (Tensor::share_storage), so a bucket, a run of consecutive parameters, is one contiguous
// range that MPI sums where backward wrote it. Packing a bucket into a buffer and back
// cost two copies of every gradient per step (issue 17: 0.90 of MPI_Allreduce at 16 MiB).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "launcher/comm/planner.hpp"
#include "launcher/nn/named_array.hpp"

namespace dlh {

class Allreducer;

// One bucket's allreduce, for a timeline (dlh-launch train --trace): from its launch to the
// moment this rank knew it complete. With MPI_Iallreduce that is the first MPI_Test (run after
// each layer of backward) or the MPI_Wait in finish() that saw it done, so the end is late by
// at most one layer's backward; a blocking call ends when it returns.
struct BucketTiming {
  size_t bucket = 0;        // index in launch order (0: the last layers' gradients)
  size_t bytes = 0;         // gradient bytes summed
  bool overlapped = false;  // launched during backward (false: in finish(), after it)
  std::chrono::steady_clock::time_point launched, completed;
};

struct GradSyncOptions {
  size_t bucket_bytes = size_t(4) << 20;  // bytes per fused bucket; a larger tensor gets its own
  bool overlap = true;                    // start buckets during backward (false: all at the end)
  // When set (not owned; must outlive the GradientSync), finish() sums every bucket with it
  // instead of MPI on `comm`, and nothing starts during backward: the hierarchical
  // allreduce is a chain of blocking collectives, so it runs at the end.
  Allreducer* reducer = nullptr;
  // When set, called on the calling thread once per bucket and step, as soon as the bucket is
  // known complete (empty: no clock is read for it).
  std::function<void(const BucketTiming&)> on_bucket;
};

class GradientSync {
 public:
  // `param_layer[i]` is the layer index of params[i]; params are in forward order. Makes
  // every params[i].ref.grad a view of the flat gradient array (contents kept), which
  // stays alive with those tensors whatever happens to this object.
  GradientSync(MPI_Comm comm, const std::vector<NamedParam>& params,
               const std::vector<size_t>& param_layer, const GradSyncOptions& options);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Layer `layer` has written its parameter gradients (layers arrive last to first).
  void layer_done(size_t layer);
  // Waits for every bucket and replaces each gradient by its sum over ranks. Returns the
  // seconds spent blocked here (communication not hidden behind backward).
  double finish();

  size_t num_buckets() const { return buckets_.size(); }
  // Every gradient, forward order, packed tight: for a caller that sums them itself.
  std::vector<float>& values() { return *flat_; }

 private:
  struct Bucket {
    size_t min_layer = 0;  // ready once this layer is done
    ElementRange span;     // its gradients' place in flat_
    MPI_Request request = MPI_REQUEST_NULL;
    // For options_.on_bucket: when it was launched, whether during backward, and whether its
    // completion was reported this step.
    std::chrono::steady_clock::time_point launched_at;
    bool overlapped = false, reported = false;
  };
  void launch(size_t index, bool blocking);
  void poke();                // lets MPI progress the outstanding requests
  void report(size_t index);  // bucket `index` is complete: tell options_.on_bucket once

  MPI_Comm comm_;
  std::shared_ptr<std::vector<float>> flat_;  // every gradient, forward order, packed tight
  std::vector<Bucket> buckets_;               // in launch order
  size_t next_bucket_ = 0;
  GradSyncOptions options_;
};

}  // namespace dlh
