// DLH — dlh_cuda_probe_device (probe_api.hpp): a few seconds' measure of one GPU, which a GPU
// calibration records and check-calibration compares with the GPU it runs on. Each rate is
// the median of several timed blocks (CUDA events), after one untimed warm-up.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launcher/engine/cuda/check.hpp"
#include "launcher/engine/cuda/probe_api.hpp"

namespace dlh {
namespace {

constexpr int kBlocks = 5;

// Median of kBlocks blocks of (work / seconds), each block `calls` back-to-back calls of
// `once` (which returns its work) timed with events on the default stream.
double MedianRate(const std::function<double()>& once, int calls) {
  cudaEvent_t start, stop;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  once();  // warm-up: algorithm set-up, clocks out of idle
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<double> rates;
  for (int b = 0; b < kBlocks; ++b) {
    double work = 0;
    CUDA_CHECK(cudaEventRecord(start));
    for (int i = 0; i < calls; ++i) work += once();
    CUDA_CHECK(cudaEventRecord(stop));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    rates.push_back(work / (std::max(ms, 1e-3f) * 1e-3));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* f() const { return static_cast<float*>(p); }
  void* p = nullptr;
};

// cuBLAS SGEMM 4096^3, plain FP32 (the engine's dense layers use no TF32).
double GemmTflops(int calls) {
  const int n = 4096;
  DeviceBuffer a(size_t(n) * n * 4), b(size_t(n) * n * 4), c(size_t(n) * n * 4);
  CUDA_CHECK(cudaMemset(a.p, 0, size_t(n) * n * 4));
  CUDA_CHECK(cudaMemset(b.p, 0, size_t(n) * n * 4));
  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  const float one = 1, zero = 0;
  const double rate = MedianRate(
      [&] {
        CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.f(), n, b.f(), n,
                                 &zero, c.f(), n));
        return 2.0 * n * double(n) * n;
      },
      calls);
  cublasDestroy(h);
  return rate / 1e12;
}

// cuDNN forward convolution, 64 x 64 x 56 x 56, 64 filters 3x3, padding 1: a ResNet-like
// layer, with the algorithm and math type cuDNN's heuristics rank first (as the engine picks).
double ConvTflops(int calls) {
  const int n = 64, c = 64, hw = 56, k = 64, r = 3;
  cudnnHandle_t h;
  CUDNN_CHECK(cudnnCreate(&h));
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hw, hw));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, hw, hw));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, r));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int got = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
  if (got < 1) throw CudaError("cuDNN offers no forward convolution algorithm");
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv, perf[0].mathType));
  DeviceBuffer xb(size_t(n) * c * hw * hw * 4), yb(size_t(n) * k * hw * hw * 4),
      wb(size_t(k) * c * r * r * 4), ws(std::max<size_t>(perf[0].memory, 4));
  CUDA_CHECK(cudaMemset(xb.p, 0, size_t(n) * c * hw * hw * 4));
  CUDA_CHECK(cudaMemset(wb.p, 0, size_t(k) * c * r * r * 4));
  const float one = 1, zero = 0;
  const double rate = MedianRate(
      [&] {
        CUDNN_CHECK(cudnnConvolutionForward(h, &one, x, xb.p, w, wb.p, conv, perf[0].algo, ws.p,
                                            perf[0].memory, &zero, y, yb.p));
        return 2.0 * n * k * hw * double(hw) * c * r * r;
      },
      calls);
  cudnnDestroyConvolutionDescriptor(conv);
  cudnnDestroyFilterDescriptor(w);
  cudnnDestroyTensorDescriptor(y);
  cudnnDestroyTensorDescriptor(x);
  cudnnDestroy(h);
  return rate / 1e12;
}

// Device-to-device copy of 512 MiB: read + write bytes per second.
double MemoryGbs(int calls) {
  const size_t bytes = size_t(512) << 20;
  DeviceBuffer a(bytes), b(bytes);
  CUDA_CHECK(cudaMemset(a.p, 0, bytes));
  return MedianRate(
             [&] {
               CUDA_CHECK(cudaMemcpy(b.p, a.p, bytes, cudaMemcpyDeviceToDevice));
               return 2.0 * double(bytes);
             },
             calls) /
         1e9;
}

nlohmann::json Probe(int device, double budget_s) {
  const auto t0 = std::chrono::steady_clock::now();
  CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int sm_khz = 0, mem_khz = 0;
  cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, device);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device);
  // A 4096^3 SGEMM takes 2-30 ms on current GPUs, the convolution 1-10 ms, the copy 0.3-3 ms:
  // blocks of these many calls keep the whole probe near the budget on fast GPUs.
  const int scale = std::max(1, int(budget_s / 3));
  const double gemm = GemmTflops(4 * scale);
  const double conv = ConvTflops(8 * scale);
  const double memory = MemoryGbs(20 * scale);
  return {
      {"kind", "cuda"},
      {"index", device},
      {"name", prop.name},
      {"sm_count", prop.multiProcessorCount},
      {"sm_clock_mhz", sm_khz / 1000},
      {"memory_clock_mhz", mem_khz / 1000},
      {"gemm_tflops", gemm},
      {"conv_tflops", conv},
      {"memory_gbs", memory},
      {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
}

}  // namespace
}  // namespace dlh

extern "C" {

__attribute__((visibility("default"))) int dlh_cuda_probe_device(int device, double budget_s,
                                                                 char* json, int size) {
  if (json == nullptr || size <= 0) return -1;
  std::string text, why;
  try {
    text = dlh::Probe(device, budget_s).dump();
  } catch (const std::exception& e) {  // nothing may cross the C boundary
    why = e.what();
  }
  if (text.empty() || text.size() >= size_t(size)) {
    if (why.empty()) why = "probe larger than " + std::to_string(size) + " bytes";
    std::snprintf(json, size_t(size), "%s", why.c_str());
    return -1;
  }
  std::snprintf(json, size_t(size), "%s", text.c_str());
  return int(text.size());
}
}
