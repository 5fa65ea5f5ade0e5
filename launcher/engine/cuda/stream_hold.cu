// DLH — the hold a profiled step puts on its stream (step_timer.hpp): a one-thread kernel that
// waits until the host writes a flag in mapped host memory, so that the step's kernels queue
// up behind it and then run back to back, each timed by its events without the host's
// issuing in between. A kernel rather than a host function on the stream: CUDA may run every
// stream's host functions on one thread, and the wait must not hold anyone else's.
#include <cuda_runtime.h>

#include "launcher/engine/cuda/check.hpp"
#include "launcher/engine/cuda/stream_hold.hpp"

namespace dlh {
namespace cuda {
namespace {

__device__ unsigned long long GlobalNanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Returns when *open is nonzero, or after max_ns (then *timed_out = 1: the host took too
// long to issue the step, and its passes' device times hold the host's gaps).
__global__ void HoldUntilOpen(const volatile int* open, int* timed_out, unsigned long long max_ns) {
  const unsigned long long start = GlobalNanoseconds();
  while (*open == 0) {
    if (GlobalNanoseconds() - start > max_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(1000);
  }
}

}  // namespace

void LaunchStreamHold(const int* open, int* timed_out, double max_seconds, cudaStream_t stream) {
  HoldUntilOpen<<<1, 1, 0, stream>>>(open, timed_out, (unsigned long long)(max_seconds * 1e9));
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace dlh
