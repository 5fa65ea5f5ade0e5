// DLH — a GPU training step timed pass by pass (launcher/engine/layer_timing.hpp), for the
// GPU layer model's per-layer terms (issue 40, part 5).
//
// Each mark() records an event on the stream and reads the host's clock: the work enqueued
// between two marks is one pass of one layer, its device time the events' difference and
// its host time the clocks'. A step that the host issues more slowly than the device runs it
// would put the host's gaps into the events' differences; so hold() first enqueues a
// kernel that keeps the stream waiting (stream_hold.cu) until release(), called once the
// host has issued the step: the passes then run back to back, and each difference is the
// device's own time. The hold gives up after kHoldSeconds, which no step's issuing comes
// near unless a library call waits for the stream it holds (a synchronisation inside the
// step); collect() then says the step was not held (held() false), and the timer stops
// holding: what it measures from then on is the passes with the host's gaps between them.
//
// The marks cost the step a few microseconds each, and the held stream changes its
// overlap of host and device: a profiled step is for the per-layer terms, never timed as a
// whole (dlh-launch time-steps times other steps for that).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/engine/cuda/resources.hpp"

namespace dlh {
namespace cuda {

class GpuStepTimer {
 public:
  static constexpr double kHoldSeconds = 2.0;

  explicit GpuStepTimer(cudaStream_t stream);
  // Lets a held stream go and waits for it: the hold reads flags_, freed here.
  ~GpuStepTimer();
  GpuStepTimer(const GpuStepTimer&) = delete;
  GpuStepTimer& operator=(const GpuStepTimer&) = delete;

  // Holds the stream until release() (see above); nothing once a hold has timed out.
  void hold();
  void release();
  // What the stream runs from here to the next mark() or close() is `pass` of `layer`.
  void mark(int layer, const char* pass);
  // The same layer as the last mark, another pass (a layer whose backward computes its
  // input gradient apart from its weights' marks "backward-data" before it).
  void mark_pass(const char* pass);
  // Ends the last pass: what the stream runs next belongs to none.
  void close();

  struct Segment {
    int layer = -1;
    std::string pass;
    double device_s = 0, host_s = 0;
  };
  // Waits for the stream's last mark; the passes marked since the last collect(), in order.
  // Throws Error where nothing was marked.
  std::vector<Segment> collect();
  // Whether the step collect() returned ran held until issued (see above).
  bool held() const { return held_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Mark {
    int layer = -1;
    std::string pass;  // empty: a close()
    Clock::time_point host;
  };
  cudaStream_t stream_;
  std::vector<Event> events_;  // one per mark, reused from step to step
  std::vector<Mark> marks_;
  PinnedArray<int> flags_;  // [0]: open, [1]: a hold timed out (device-visible)
  int* open_device_ = nullptr;
  int* timed_out_device_ = nullptr;
  bool holding_ = true;     // false once a hold timed out
  bool held_ = false;       // the last collected step's
  bool step_held_ = false;  // a hold was put on the step being marked
};

}  // namespace cuda
}  // namespace dlh
