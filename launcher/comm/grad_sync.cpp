// DLH — fused, overlapped gradient allreduce (see grad_sync.hpp).
#include "launcher/comm/grad_sync.hpp"

#include <algorithm>
#include <chrono>

#include "launcher/comm/allreduce.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/comm/planner.hpp"

namespace dlh {

GradientSync::GradientSync(MPI_Comm comm, const std::vector<NamedParam>& params,
                           const std::vector<size_t>& param_layer, const GradSyncOptions& options)
    : comm_(comm), options_(options) {
  std::vector<size_t> param_count;
  std::vector<ElementRange> param_range;
  size_t total = 0;
  for (const auto& p : params) {
    param_count.push_back(p.ref.grad->size());
    param_range.push_back(ElementRange{total, p.ref.grad->size()});
    total += p.ref.grad->size();
  }
  flat_ = std::make_shared<std::vector<float>>(total);
  for (size_t i = 0; i < params.size(); ++i)
    params[i].ref.grad->share_storage(flat_, param_range[i].offset);
  for (const BucketPlan& plan : PlanBuckets(param_count, param_layer, options_.bucket_bytes)) {
    Bucket b;
    b.min_layer = plan.min_layer;
    b.span = BucketSpan(plan, param_range);
    buckets_.push_back(std::move(b));
  }
}

GradientSync::~GradientSync() {
  // Never leave a request dangling (e.g. when an exception unwinds mid-step).
  for (auto& b : buckets_)
    if (b.request != MPI_REQUEST_NULL) MPI_Request_free(&b.request);
}

void GradientSync::launch(size_t index, bool blocking) {
  Bucket& b = buckets_[index];
  if (options_.on_bucket) {
    b.launched_at = std::chrono::steady_clock::now();
    b.overlapped = !blocking;
  }
  float* data = flat_->data() + b.span.offset;
  const size_t elements = b.span.count;
  if (options_.reducer) {
    options_.reducer->allreduce(data, elements);
    report(index);
    return;
  }
  const int count = int(elements);
  if (blocking) {
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comm_));
    report(index);
  } else {
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, comm_, &b.request));
  }
}

void GradientSync::poke() {
  for (size_t i = 0; i < next_bucket_; ++i) {
    if (buckets_[i].request == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPI_CHECK(MPI_Test(&buckets_[i].request, &done, MPI_STATUS_IGNORE));
    if (done) report(i);
  }
}

void GradientSync::report(size_t index) {
  Bucket& b = buckets_[index];
  if (!options_.on_bucket || b.reported) return;
  b.reported = true;
  BucketTiming t;
  t.bucket = index;
  t.bytes = sizeof(float) * b.span.count;
  t.overlapped = b.overlapped;
  t.launched = b.launched_at;
  t.completed = std::chrono::steady_clock::now();
  options_.on_bucket(t);
}

void GradientSync::layer_done(size_t layer) {
  // Layer 0 is the last of backward: nothing is left to overlap with, so its buckets wait
  // for finish(), which uses the blocking MPI_Allreduce (faster than the non-blocking one
  // in Open MPI, whose libnbc schedules are not tuned like the blocking algorithms).
  if (!options_.overlap || options_.reducer || layer == 0) return;
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].min_layer >= layer) {
    launch(next_bucket_, /*blocking=*/false);
    ++next_bucket_;
  }
  poke();
}

double GradientSync::finish() {
  auto start = std::chrono::steady_clock::now();
  while (next_bucket_ < buckets_.size()) launch(next_bucket_++, /*blocking=*/true);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (b.request != MPI_REQUEST_NULL) MPI_CHECK(MPI_Wait(&b.request, MPI_STATUS_IGNORE));
    report(i);
    b.reported = false;
  }
  next_bucket_ = 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace dlh
