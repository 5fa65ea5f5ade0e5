// DLH — shared pieces of the GPU tests: a CUDA context for layers, host<->device copies,
// and the comparison the tests use (relative L2 error; docs/developer-guide.md, "Tests", and
// docs/reference/dlh-launch.md, "GPU engine"). Every test skips, saying why, when the machine
// has no usable GPU; with REQUIRE_GPU=1 gpu_main.cpp turns any skip into a failed run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "launcher/engine/cuda/gpu_layers.hpp"
#include "launcher/engine/cuda/kernels.hpp"
#include "launcher/engine/cuda/resources.hpp"

namespace dlh {
namespace cuda {

// Layer specs for the tests' networks (the other fields keep LayerSpec's defaults).
inline LayerSpec Kind(LayerKind k) {
  LayerSpec s;
  s.kind = k;
  return s;
}
inline LayerSpec Dense(int units) {
  LayerSpec s = Kind(LayerKind::Dense);
  s.units = units;
  return s;
}
inline LayerSpec Drop(double rate) {
  LayerSpec s = Kind(LayerKind::Dropout);
  s.rate = rate;
  return s;
}

// Empty when a GPU is usable, else why not (set once by main).
std::string& NoGpuReason();

#define DLH_REQUIRE_GPU() \
  if (!::dlh::cuda::NoGpuReason().empty()) GTEST_SKIP() << ::dlh::cuda::NoGpuReason()

// Stream, handles and scratch for layers under test.
struct TestGpu {
  explicit TestGpu(int max_batch) : stream(MakeStream()), ones(size_t(max_batch)) {
    cublasHandle_t b = nullptr;
    CUBLAS_CHECK(cublasCreate(&b));
    blas = Cublas(b);
    CUBLAS_CHECK(cublasSetStream(b, stream.get()));
    cublasLtHandle_t l = nullptr;
    CUBLAS_CHECK(cublasLtCreate(&l));
    blas_lt = CublasLt(l);
    cudnnHandle_t d = nullptr;
    CUDNN_CHECK(cudnnCreate(&d));
    dnn = Cudnn(d);
    CUDNN_CHECK(cudnnSetStream(d, stream.get()));
    Fill(ones.get(), 1.0f, ones.size(), stream.get());
    context.stream = stream.get();
    context.cublas = b;
    context.cublaslt = l;
    context.cudnn = d;
    context.workspace = &workspace;
    context.transient = &transient;
    context.ones = ones.get();
  }
  void sync() { CUDA_CHECK(cudaStreamSynchronize(stream.get())); }
  Stream stream;
  Cublas blas;
  CublasLt blas_lt;
  Cudnn dnn;
  DeviceArray<char> workspace, transient;
  DeviceArray<float> ones;
  GpuContext context;
};

inline DeviceArray<float> Upload(const std::vector<float>& host) {
  DeviceArray<float> d(std::max<size_t>(host.size(), 1));
  CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

inline std::vector<float> Download(const float* device, size_t count) {
  std::vector<float> host(count);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// Poisoned device output: a kernel that skips an element leaves a NaN the check catches.
inline DeviceArray<float> Poisoned(size_t count) {
  std::vector<float> nan(count, std::nanf(""));
  return Upload(nan);
}

inline std::vector<float> RandomNormal(size_t count, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(count);
  for (float& x : v) x = dist(gen);
  return v;
}

// ||got - want|| / ||want|| (||got - want|| when want is 0); NaN when any value of got is
// NaN or the sizes differ.
inline double RelativeL2(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::nan("");
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return std::nan("");
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// RelativeL2(got, want) <= tolerance; any NaN fails.
inline ::testing::AssertionResult Near(const std::vector<float>& got,
                                       const std::vector<float>& want, double tolerance) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  const double rel = RelativeL2(got, want);
  if (std::isnan(rel)) return ::testing::AssertionFailure() << "NaN in the result";
  if (rel <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative L2 error " << rel << " > " << tolerance;
}

}  // namespace cuda
}  // namespace dlh
