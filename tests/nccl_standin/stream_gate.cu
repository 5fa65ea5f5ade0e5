// DLH NCCL stand-in — the gate a collective on device memory puts on its stream: a one-thread
// kernel that waits until the communicator's worker has written the collective's ticket into
// a flag in mapped host memory. A host function on the stream could not wait instead: CUDA
// may run every stream's host functions on one thread, so one held there (a reduce-scatter
// waiting for its peers) would keep another stream's (an all-gather those peers wait for)
// from ever running.
#include <cuda_runtime.h>

namespace {

__global__ void WaitForTicket(const volatile unsigned* flag, unsigned ticket) {
  while (*flag < ticket) __nanosleep(2000);
}

}  // namespace

extern "C" cudaError_t dlhStandinGate(const unsigned* flag, unsigned ticket, cudaStream_t stream) {
  WaitForTicket<<<1, 1, 0, stream>>>(flag, ticket);
  return cudaGetLastError();
}
