// DLH — bf16 conversions (see bf16.hpp).
#include "launcher/engine/cuda/bf16.hpp"
#include "launcher/engine/cuda/check.hpp"

namespace dlh {
namespace cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(size_t count) {
  const size_t b = (count + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}

__global__ void ToBf16Kernel(const float* in, bf16* out, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void FromBf16Kernel(const bf16* in, float* out, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

}  // namespace

void ToBf16(const float* in, bf16* out, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  ToBf16Kernel<<<Blocks(count), kThreads, 0, stream>>>(in, out, count);
  CUDA_CHECK(cudaGetLastError());
}

void FromBf16(const bf16* in, float* out, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  FromBf16Kernel<<<Blocks(count), kThreads, 0, stream>>>(in, out, count);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace cuda
}  // namespace dlh
