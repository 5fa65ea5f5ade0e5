// DLH — holding a stream until the host says go (stream_hold.cu; used by step_timer.hpp).
#pragma once

#include <cuda_runtime.h>

namespace dlh {
namespace cuda {

// Enqueues on `stream` a wait until *open (device-visible host memory) is nonzero, or
// `max_seconds` at most, after which it sets *timed_out (device-visible) to 1 and lets
// the stream go on.
void LaunchStreamHold(const int* open, int* timed_out, double max_seconds, cudaStream_t stream);

}  // namespace cuda
}  // namespace dlh
