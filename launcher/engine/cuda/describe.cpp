// DLH — dlh_cuda_describe (backend_api.hpp): what a calibration was measured on. A GPU
// calibration is only as good as its record of the GPU and of the libraries whose kernels
// it timed (a cuDNN update alone moves convolution times), so `dlh-launch time-steps`
// stores this object in its result and dlh-estimate in the calibration.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

// 13000 -> "13.0" (CUDA's major * 1000 + minor * 10).
std::string CudaVersionText(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// cuDNN 9: major * 10000 + minor * 100 + patch (cuDNN 8 used * 1000; the backend needs 9).
std::string CudnnVersionText(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

// NCCL >= 2.9: major * 10000 + minor * 100 + patch.
std::string NcclVersionText(int v) {
  return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." +
         std::to_string(v % 100);
}

int Attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  return cudaDeviceGetAttribute(&value, attribute, device) == cudaSuccess ? value : -1;
}

nlohmann::ordered_json Describe(int device, std::string* why) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    *why = std::string("CUDA: ") + cudaGetErrorString(e);
    return nullptr;
  }
  if (device < 0 || device >= count) {
    *why = "GPU " + std::to_string(device) + " requested, " + std::to_string(count) + " visible";
    return nullptr;
  }
  cudaDeviceProp prop;
  if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess) {
    *why = std::string("CUDA: ") + cudaGetErrorString(e);
    return nullptr;
  }
  char bus[32] = "";
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess) bus[0] = 0;
  int driver = 0, runtime = 0, nccl = 0, blas_major = 0, blas_minor = 0, blas_patch = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (ncclGetVersion(&nccl) != ncclSuccess) nccl = 0;
  cublasGetProperty(MAJOR_VERSION, &blas_major);
  cublasGetProperty(MINOR_VERSION, &blas_minor);
  cublasGetProperty(PATCH_LEVEL, &blas_patch);
  const int sm_khz = Attribute(cudaDevAttrClockRate, device);
  const int mem_khz = Attribute(cudaDevAttrMemoryClockRate, device);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(device) != cudaSuccess ||
      cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
    free_bytes = 0;
  return {
      {"kind", "cuda"},
      {"index", device},
      {"name", prop.name},
      {"pci_bus_id", bus},
      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"multiprocessors", prop.multiProcessorCount},
      {"memory_bytes", uint64_t(prop.totalGlobalMem)},
      {"memory_free_bytes", uint64_t(free_bytes)},
      // Peak clocks as the runtime reports them; the clock a step actually ran at depends on
      // power and temperature (NVML), which this library does not link.
      {"max_sm_clock_mhz", sm_khz > 0 ? nlohmann::json(sm_khz / 1000) : nlohmann::json(nullptr)},
      {"max_memory_clock_mhz",
       mem_khz > 0 ? nlohmann::json(mem_khz / 1000) : nlohmann::json(nullptr)},
      {"memory_bus_bits", Attribute(cudaDevAttrGlobalMemoryBusWidth, device)},
      {"driver_cuda", CudaVersionText(driver)},
      {"cuda_runtime", CudaVersionText(runtime)},
      {"cudnn", CudnnVersionText(cudnnGetVersion())},
      {"cublas", std::to_string(blas_major) + "." + std::to_string(blas_minor) + "." +
                     std::to_string(blas_patch)},
      {"nccl", nccl > 0 ? NcclVersionText(nccl) : std::string("unknown")}};
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int dlh_cuda_describe(int device, char* json, int size) {
  if (json == nullptr || size <= 0) return -1;
  std::string text, why;
  try {
    const nlohmann::ordered_json j = Describe(device, &why);
    if (!j.is_null()) text = j.dump();
  } catch (const std::exception& e) {  // nothing may cross the C boundary
    why = e.what();
  }
  if (text.empty() || text.size() >= size_t(size)) {
    if (why.empty()) why = "description larger than " + std::to_string(size) + " bytes";
    std::snprintf(json, size_t(size), "%s", why.c_str());
    return -1;
  }
  std::snprintf(json, size_t(size), "%s", text.c_str());
  return int(text.size());
}
}
