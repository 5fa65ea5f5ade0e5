// DLH — gradient allreduce on the GPU: the logic of grad_sync_logic.hpp on CUDA streams and
// events, with NCCL. The same logic runs on host memory in make check
// (tests/nccl_standin/grad_sync_logic_mpitest.cpp).
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "launcher/engine/cuda/check.hpp"
#include "launcher/engine/cuda/grad_sync_logic.hpp"
#include "launcher/engine/cuda/resources.hpp"

namespace dlh {
namespace cuda {

// The device of GradSyncLogic: CUDA streams and events, pinned host staging, NCCL.
struct CudaDevice {
  using Stream = cuda::Stream;
  using Event = cuda::Event;
  using StreamRef = cudaStream_t;
  using EventRef = cudaEvent_t;
  template <class T>
  using HostArray = PinnedArray<T>;

  Stream make_stream() { return MakeStream(); }
  Event make_event() { return MakeEvent(); }
  void record(cudaEvent_t e, cudaStream_t s) { CUDA_CHECK(cudaEventRecord(e, s)); }
  void wait_event(cudaStream_t s, cudaEvent_t e) { CUDA_CHECK(cudaStreamWaitEvent(s, e, 0)); }
  bool query(cudaEvent_t e) {
    const cudaError_t r = cudaEventQuery(e);
    if (r == cudaErrorNotReady) return false;
    CUDA_CHECK(r);
    return true;
  }
  void to_host(float* host, const float* device, size_t n, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(host, device, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  void to_device(float* device, const float* host, size_t n, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(device, host, n * sizeof(float), cudaMemcpyHostToDevice, s));
  }
  void synchronize(cudaStream_t s) {
    if (s) cudaStreamSynchronize(s);
  }
  ncclResult_t all_reduce(const float* in, float* out, size_t n, ncclComm_t c, cudaStream_t s) {
    return ncclAllReduce(in, out, n, ncclFloat, ncclSum, c, s);
  }
  ncclResult_t reduce_scatter(const float* in, float* out, size_t n, ncclComm_t c, cudaStream_t s) {
    return ncclReduceScatter(in, out, n, ncclFloat, ncclSum, c, s);
  }
  ncclResult_t all_gather(const float* in, float* out, size_t n, ncclComm_t c, cudaStream_t s) {
    return ncclAllGather(in, out, n, ncclFloat, c, s);
  }
  ncclResult_t reduce(const float* in, float* out, size_t n, int root, ncclComm_t c,
                      cudaStream_t s) {
    return ncclReduce(in, out, n, ncclFloat, ncclSum, root, c, s);
  }
  ncclResult_t broadcast(const float* in, float* out, size_t n, int root, ncclComm_t c,
                         cudaStream_t s) {
    return ncclBroadcast(in, out, n, ncclFloat, root, c, s);
  }
};

// Compiled once, in gpu_allreduce.cpp.
extern template class GradSyncLogic<CudaDevice>;
using GpuGradientSync = GradSyncLogic<CudaDevice>;

}  // namespace cuda
}  // namespace dlh
