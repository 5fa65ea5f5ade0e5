// DLH — the CUDA backend's version and how many of this machine's GPUs it can use
// (backend_api.hpp: dlh_cuda_version, dlh_cuda_probe). Called on machines without a GPU.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "launcher/engine/cuda/backend_api.hpp"

extern "C" {

__attribute__((visibility("default"))) const char* dlh_cuda_version() { return DLH_VERSION; }

__attribute__((visibility("default"))) int dlh_cuda_probe(char* reason, size_t reason_size) {
  auto say = [&](const std::string& text) {
    std::snprintf(reason, reason_size, "%s", text.c_str());
  };
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    if (e == cudaErrorInsufficientDriver && driver == 0)
      say("no CUDA driver (libcuda.so.1 not found)");
    else
      say(std::string("CUDA: ") + cudaGetErrorString(e));
    return 0;
  }
  if (count == 0) {
    say("no CUDA device");
    return 0;
  }
  // The backend carries sm_80 and sm_90 code and compute_90 PTX (see
  // launcher/engine/cuda/module.mk).
  int usable = 0;
  std::string too_old;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    if (prop.major >= 8)
      ++usable;
    else
      too_old = std::string(prop.name) + " is sm_" + std::to_string(prop.major) +
                std::to_string(prop.minor) + "; DLH's GPU code needs sm_80 or newer";
  }
  if (usable == 0) say(too_old);
  return usable;
}
}
