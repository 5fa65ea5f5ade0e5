// DLH — one checked-call macro per CUDA library. A failed call throws dlh::CudaError
// with the call, the library's own message and the source position; the engine turns it
// into the run's one-line error like any other dlh::Error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "common/error.hpp"

namespace dlh {

struct CudaError : Error {
  using Error::Error;
};

namespace cuda {
[[noreturn]] void Fail(const char* library, const std::string& reason, const char* call,
                       const char* file, int line);

inline void Check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) Fail("CUDA", cudaGetErrorString(e), call, file, line);
}
inline void Check(cublasStatus_t e, const char* call, const char* file, int line) {
  if (e != CUBLAS_STATUS_SUCCESS) Fail("cuBLAS", cublasGetStatusString(e), call, file, line);
}
inline void Check(cudnnStatus_t e, const char* call, const char* file, int line) {
  if (e != CUDNN_STATUS_SUCCESS) Fail("cuDNN", cudnnGetErrorString(e), call, file, line);
}
inline void Check(ncclResult_t e, const char* call, const char* file, int line) {
  if (e != ncclSuccess) Fail("NCCL", ncclGetErrorString(e), call, file, line);
}
}  // namespace cuda
}  // namespace dlh

#define CUDA_CHECK(call) ::dlh::cuda::Check((call), #call, __FILE__, __LINE__)
#define CUBLAS_CHECK(call) ::dlh::cuda::Check((call), #call, __FILE__, __LINE__)
#define CUDNN_CHECK(call) ::dlh::cuda::Check((call), #call, __FILE__, __LINE__)
#define NCCL_CHECK(call) ::dlh::cuda::Check((call), #call, __FILE__, __LINE__)
