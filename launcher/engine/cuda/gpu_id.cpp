// DLH — which physical GPU a visible device index is (backend_api.hpp: dlh_cuda_gpu_id).
// dlh-launch compares them across the ranks of a node before it builds any engine: two
// ranks on one GPU would make NCCL refuse the communicator (launcher/engine/device.cpp).
#include <cuda_runtime.h>

#include <cstdio>

#include "launcher/engine/cuda/backend_api.hpp"

extern "C" {

__attribute__((visibility("default"))) int dlh_cuda_gpu_id(int device, char* out, size_t out_size) {
  if (out == nullptr || out_size == 0) return 0;
  char bus[32] = "";
  const cudaError_t e = cudaDeviceGetPCIBusId(bus, int(sizeof bus), device);
  if (e != cudaSuccess) {
    std::snprintf(out, out_size, "GPU %d: %s", device, cudaGetErrorString(e));
    return 0;
  }
  std::snprintf(out, out_size, "%s", bus);
  return 1;
}
}
