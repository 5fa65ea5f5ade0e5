// DLH — a GPU training step timed pass by pass (see step_timer.hpp).
#include "launcher/engine/cuda/step_timer.hpp"

#include "common/error.hpp"
#include "launcher/engine/cuda/check.hpp"
#include "launcher/engine/cuda/stream_hold.hpp"

namespace dlh {
namespace cuda {

GpuStepTimer::GpuStepTimer(cudaStream_t stream) : stream_(stream), flags_(2) {
  flags_.get()[0] = 1;
  flags_.get()[1] = 0;
  // Page-locked memory is mapped into the device under unified addressing; its device
  // address is asked for all the same, as CUDA documents.
  void* device = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&device, flags_.get(), 0));
  open_device_ = static_cast<int*>(device);
  timed_out_device_ = open_device_ + 1;
}

GpuStepTimer::~GpuStepTimer() {
  release();
  cudaStreamSynchronize(stream_);  // no throw from a destructor: an error here has no one to tell
}

void GpuStepTimer::hold() {
  if (!holding_) return;
  step_held_ = true;
  // The last hold's kernel has returned: every mark since it was recorded behind it, and
  // the step's host waits (the loss, backward) came after its release().
  flags_.get()[0] = 0;
  LaunchStreamHold(open_device_, timed_out_device_, kHoldSeconds, stream_);
}

void GpuStepTimer::release() {
  // A plain store the kernel's volatile load sees; nothing else orders against it.
  reinterpret_cast<volatile int*>(flags_.get())[0] = 1;
}

void GpuStepTimer::mark(int layer, const char* pass) {
  const size_t k = marks_.size();
  if (k == events_.size()) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreate(&e));  // with timing, unlike the engine's MakeEvent()
    events_.emplace_back(e);
  }
  marks_.push_back(Mark{layer, pass, Clock::now()});
  CUDA_CHECK(cudaEventRecord(events_[k].get(), stream_));
}

void GpuStepTimer::mark_pass(const char* pass) {
  mark(marks_.empty() ? -1 : marks_.back().layer, pass);
}

void GpuStepTimer::close() { mark(-1, ""); }

std::vector<GpuStepTimer::Segment> GpuStepTimer::collect() {
  if (marks_.empty()) throw Error("layer timing: no step was timed (internal)");
  release();  // never leave the stream held
  CUDA_CHECK(cudaEventSynchronize(events_[marks_.size() - 1].get()));
  const bool timed_out = reinterpret_cast<volatile int*>(flags_.get())[1] != 0;
  flags_.get()[1] = 0;
  held_ = step_held_ && !timed_out;
  step_held_ = false;
  if (timed_out) holding_ = false;
  std::vector<Mark> marks;
  marks.swap(marks_);
  std::vector<Segment> out;
  for (size_t k = 0; k + 1 < marks.size(); ++k) {
    if (marks[k].pass.empty()) continue;  // after a close()
    Segment s;
    s.layer = marks[k].layer;
    s.pass = marks[k].pass;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[k].get(), events_[k + 1].get()));
    s.device_s = double(ms) * 1e-3;
    s.host_s = std::chrono::duration<double>(marks[k + 1].host - marks[k].host).count();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cuda
}  // namespace dlh
