// DLH — RAII owners of the CUDA handles the engine uses: device and pinned host arrays,
// streams, events, cuBLAS, cuBLASLt and cuDNN handles and their descriptors. Each owner releases
// its handle exactly once and is movable, not copyable. Release errors are ignored: they
// happen while unwinding from an earlier error that is the one worth reporting.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <utility>

#include "launcher/engine/cuda/check.hpp"

namespace dlh {
namespace cuda {

template <typename T, typename Traits>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, T())) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T());
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  T get() const { return h_; }
  void reset() {
    if (h_) Traits::release(h_);
    h_ = T();
  }

 private:
  T h_ = T();
};

struct StreamTraits {
  static void release(cudaStream_t s) { cudaStreamDestroy(s); }
};
struct EventTraits {
  static void release(cudaEvent_t e) { cudaEventDestroy(e); }
};
struct CublasTraits {
  static void release(cublasHandle_t h) { cublasDestroy(h); }
};
struct CublasLtTraits {
  static void release(cublasLtHandle_t h) { cublasLtDestroy(h); }
};
struct MatmulDescTraits {
  static void release(cublasLtMatmulDesc_t d) { cublasLtMatmulDescDestroy(d); }
};
struct MatrixLayoutTraits {
  static void release(cublasLtMatrixLayout_t l) { cublasLtMatrixLayoutDestroy(l); }
};
struct MatmulPreferenceTraits {
  static void release(cublasLtMatmulPreference_t p) { cublasLtMatmulPreferenceDestroy(p); }
};
struct CudnnTraits {
  static void release(cudnnHandle_t h) { cudnnDestroy(h); }
};
struct TensorDescTraits {
  static void release(cudnnTensorDescriptor_t d) { cudnnDestroyTensorDescriptor(d); }
};
struct FilterDescTraits {
  static void release(cudnnFilterDescriptor_t d) { cudnnDestroyFilterDescriptor(d); }
};
struct ConvDescTraits {
  static void release(cudnnConvolutionDescriptor_t d) { cudnnDestroyConvolutionDescriptor(d); }
};
struct PoolDescTraits {
  static void release(cudnnPoolingDescriptor_t d) { cudnnDestroyPoolingDescriptor(d); }
};
struct ActDescTraits {
  static void release(cudnnActivationDescriptor_t d) { cudnnDestroyActivationDescriptor(d); }
};

using Stream = Handle<cudaStream_t, StreamTraits>;
using Event = Handle<cudaEvent_t, EventTraits>;
using Cublas = Handle<cublasHandle_t, CublasTraits>;
using CublasLt = Handle<cublasLtHandle_t, CublasLtTraits>;
using MatmulDesc = Handle<cublasLtMatmulDesc_t, MatmulDescTraits>;
using MatrixLayout = Handle<cublasLtMatrixLayout_t, MatrixLayoutTraits>;
using MatmulPreference = Handle<cublasLtMatmulPreference_t, MatmulPreferenceTraits>;
using Cudnn = Handle<cudnnHandle_t, CudnnTraits>;
using TensorDesc = Handle<cudnnTensorDescriptor_t, TensorDescTraits>;
using FilterDesc = Handle<cudnnFilterDescriptor_t, FilterDescTraits>;
using ConvDesc = Handle<cudnnConvolutionDescriptor_t, ConvDescTraits>;
using PoolDesc = Handle<cudnnPoolingDescriptor_t, PoolDescTraits>;
using ActDesc = Handle<cudnnActivationDescriptor_t, ActDescTraits>;

inline Stream MakeStream() {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}
inline Event MakeEvent() {  // no timing: cheaper to record and wait on
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return Event(e);
}
inline TensorDesc MakeTensorDesc() {
  cudnnTensorDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}
// An N x C x H x W tensor in NCHW order, fp32 unless said (bf16: a convolution's operands
// in bf16 precision).
inline void SetTensor4d(const TensorDesc& d, int n, int c, int h, int w,
                        cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, type, n, c, h, w));
}

// Where a CudaArray's memory lives: the device, or page-locked host memory (so that
// copies to and from the device run asynchronously).
struct DeviceMemory {
  static void* allocate(size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  static void release(void* p) { cudaFree(p); }
};
struct PinnedMemory {
  static void* allocate(size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  static void release(void* p) { cudaFreeHost(p); }
};

// `count` values of T (count 0: no allocation). Contents start undefined.
template <typename T, typename Memory>
class CudaArray {
 public:
  CudaArray() = default;
  explicit CudaArray(size_t count) { resize(count); }
  ~CudaArray() { release(); }
  CudaArray(CudaArray&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  CudaArray& operator=(CudaArray&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  CudaArray(const CudaArray&) = delete;
  CudaArray& operator=(const CudaArray&) = delete;

  // Reallocates only to grow; contents are lost when it does.
  void resize(size_t count) {
    if (count <= n_) return;
    release();
    p_ = static_cast<T*>(Memory::allocate(count * sizeof(T)));
    n_ = count;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  void release() {
    if (p_) Memory::release(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

template <typename T>
using DeviceArray = CudaArray<T, DeviceMemory>;
template <typename T>
using PinnedArray = CudaArray<T, PinnedMemory>;

}  // namespace cuda
}  // namespace dlh
