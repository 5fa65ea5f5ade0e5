// DLH — --device: loading the CUDA backend and agreeing on the engine (see device.hpp).
#include "launcher/engine/device.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "common/error.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/engine/cuda/backend_api.hpp"

namespace dlh {
namespace {

// The backend stays loaded for the life of the process: engines it made hold its code.
struct CudaBackend {
  DlhCudaProbeFn probe = nullptr;
  DlhCudaMakeEngineFn make = nullptr;
  std::string error;  // why it cannot be used (empty: it can)
};

const CudaBackend& LoadCudaBackend() {
  static const CudaBackend backend = [] {
    CudaBackend b;
    const std::string path = CudaBackendPath();
    if (!std::filesystem::exists(path)) {
      b.error = "this build of DLH has no CUDA backend (" + path + " not found)";
      return b;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      b.error = "cannot load the CUDA backend: " + std::string(why ? why : path);
      return b;
    }
    auto version = reinterpret_cast<DlhCudaVersionFn>(dlsym(handle, "dlh_cuda_version"));
    b.probe = reinterpret_cast<DlhCudaProbeFn>(dlsym(handle, "dlh_cuda_probe"));
    b.make = reinterpret_cast<DlhCudaMakeEngineFn>(dlsym(handle, "dlh_cuda_make_engine"));
    if (!version || !b.probe || !b.make) {
      b.error = path + ": not a DLH CUDA backend (entry points missing)";
    } else if (std::string(version()) != DLH_VERSION) {
      b.error = path + ": backend of DLH " + version() + ", this is DLH " DLH_VERSION;
    }
    return b;
  }();
  return backend;
}

// One rank's GPU, or UsageError naming the rank, its host and the reason.
void RequireGpu(int rank) {
  const CudaBackend& b = LoadCudaBackend();
  std::string reason = b.error;
  if (reason.empty()) {
    char text[512] = "";
    if (b.probe(text, sizeof text) > 0) return;
    reason = text;
  }
  throw UsageError("no usable GPU on rank " + std::to_string(rank) + " (" + mpi::Hostname() +
                   "): " + reason);
}

}  // namespace

void CheckDeviceKind(const std::string& kind) {
  if (kind != "auto" && kind != "cpu" && kind != "cuda")
    throw UsageError("--device: must be auto, cpu or cuda, got '" + kind + "'");
}

std::string CudaBackendPath() {
  if (const char* env = std::getenv("DLH_CUDA_BACKEND"); env && *env) return env;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libdlh_cuda.so";
  return (exe.parent_path().parent_path() / "lib" / "dlh" / "libdlh_cuda.so").string();
}

std::unique_ptr<Engine> MakeEngine(const std::string& device, const EngineConfig& config,
                                   std::string* note) {
  CheckDeviceKind(device);
  note->clear();
  if (device == "cpu") return MakeCpuEngine(config);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(config.comm, &rank));
  try {
    RunCollectively(config.comm, [&] { RequireGpu(rank); });
  } catch (const CollectiveError& e) {
    if (device == "cuda")
      throw CollectiveError(std::string("--device cuda: ") + e.what(), e.exit_code);
    *note = std::string(e.what()) + "; training on the CPU";
    return MakeCpuEngine(config);
  }
  std::unique_ptr<Engine> engine;
  RunCollectively(config.comm, [&] { engine.reset(LoadCudaBackend().make(&config)); });
  return engine;
}

}  // namespace dlh
