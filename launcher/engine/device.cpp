// DLH — --device: loading the CUDA backend and agreeing on the engine (see device.hpp).
#include "launcher/engine/device.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

#include "common/cuda_support.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/comm/collective.hpp"
#include "launcher/comm/mpi.hpp"
#include "launcher/engine/cuda/backend_api.hpp"
#include "launcher/engine/gpu_assignment.hpp"
#include "launcher/engine/gpu_placement.hpp"
#include "launcher/engine/layer_timing.hpp"

namespace dlh {
namespace {

// The backend stays loaded for the life of the process: engines it made hold its code.
struct CudaBackend {
  DlhCudaProbeFn probe = nullptr;
  DlhCudaMakeEngineFn make = nullptr;
  DlhCudaGpuIdFn gpu_id = nullptr;
  // Optional: only DescribeCudaDevice needs it.
  DlhCudaDescribeFn describe = nullptr;
  // Optional: only a profiled step (dlh-launch time-steps --profile) needs it.
  DlhCudaLayerTimingFn layer_timing = nullptr;
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
    b.gpu_id = reinterpret_cast<DlhCudaGpuIdFn>(dlsym(handle, "dlh_cuda_gpu_id"));
    b.describe = reinterpret_cast<DlhCudaDescribeFn>(dlsym(handle, "dlh_cuda_describe"));
    b.layer_timing = reinterpret_cast<DlhCudaLayerTimingFn>(dlsym(handle, "dlh_cuda_layer_timing"));
    if (!version || !b.probe || !b.make || !b.gpu_id) {
      b.error = path + ": not a DLH CUDA backend (entry points missing)";
    } else if (std::string(version()) != DLH_VERSION) {
      b.error = path + ": backend of DLH " + version() + ", this is DLH " DLH_VERSION;
    }
    return b;
  }();
  return backend;
}

// One rank's GPU: the index it will use among the visible ones (the backend's fallback
// rule, gpu_assignment.hpp) and its PCI bus id; UsageError naming the rank, its host and the
// reason when it has none.
RankGpu RequireGpu(int rank, int bound_device, int local_rank, const std::string& node,
                   int* index) {
  const CudaBackend& b = LoadCudaBackend();
  std::string reason = b.error;
  if (reason.empty()) {
    char text[512] = "";
    const int count = b.probe(text, sizeof text);
    if (count > 0) {
      *index = GpuIndexFor(bound_device, local_rank, count);
      if (*index < count && b.gpu_id(*index, text, sizeof text) == 1)
        return RankGpu{mpi::MachineName(), node, text};
      if (*index >= count)
        std::snprintf(text, sizeof text, "GPU %d requested, %d visible", *index, count);
    }
    reason = text;
  }
  throw UsageError("no usable GPU on rank " + std::to_string(rank) + " (" + mpi::Hostname() +
                   "): " + reason);
}

// Every rank's GPU, the same list on every rank. Collective.
std::vector<RankGpu> GatherRankGpus(MPI_Comm comm, const RankGpu& mine) {
  std::vector<RankGpu> all;
  const std::string line = mine.host + '\n' + mine.node + '\n' + mine.gpu;
  for (const std::string& text : mpi::AllGatherStrings(comm, line)) {
    RankGpu g;
    std::istringstream in(text);
    std::getline(in, g.host);
    std::getline(in, g.node);
    std::getline(in, g.gpu);
    all.push_back(g);
  }
  return all;
}

// Each rank on the CPUs near its GPU (gpu_placement.hpp), before the engine starts the threads
// that inherit the binding. Rank 0 says what changed or looks wrong, one line per such rank
// (at most 16, then a count): a rank already near its GPU, or on a machine without NUMA
// information, is not news. Collective.
void PlaceRanksNearGpus(MPI_Comm comm, int rank, const RankGpu& mine) {
  const GpuPlacement p = ApplyGpuPlacement(mine.gpu);
  const bool news = p.bind || p.far;
  const std::vector<std::string> all = mpi::AllGatherStrings(
      comm, news ? "rank " + std::to_string(rank) + " (" + mine.host + "): " + p.note : "");
  if (rank != 0) return;
  int shown = 0, more = 0;
  for (const std::string& line : all) {
    if (line.empty()) continue;
    if (shown < 16) {
      std::fprintf(stderr, "dlh-launch: CPU placement: %s\n", line.c_str());
      ++shown;
    } else {
      ++more;
    }
  }
  if (more > 0) std::fprintf(stderr, "dlh-launch: CPU placement: %d more ranks likewise\n", more);
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

namespace {

// The line that ends a run which must not train on the CPU and cannot train on its GPUs:
// --device cuda, a plan for GPUs, or auto once every rank holds a GPU.
[[noreturn]] void RefuseGpu(const DeviceChoice& c, const std::string& why, int code) {
  if (c.device == "cuda") throw CollectiveError("--device cuda: " + why, code);
  if (!c.gpu_required_by.empty())  // a job given GPUs that trained on the CPU would be slow, unseen
    throw CollectiveError(c.gpu_required_by + ": " + why +
                              "; not training on the CPU (--device cpu to train there anyway)",
                          code);
  throw CollectiveError("--device auto: " + why +
                            "; every rank has a GPU, so not training on the CPU (--device cpu "
                            "to train there anyway)",
                        code);
}

}  // namespace

DeviceChoice ChooseDevice(const std::string& device, const EngineConfig& config,
                          const std::string& gpu_required_by) {
  CheckDeviceKind(device);
  DeviceChoice c;
  c.device = device;
  c.gpu_required_by = gpu_required_by;
  // A spec only the GPU can train (bf16): every rank decides alike, from the spec alone.
  const std::string cpu_unsupported =
      config.spec != nullptr ? CpuEngineUnsupported(*config.spec) : std::string();
  auto on_cpu = [&](const std::string& why_not_gpu) {
    if (!cpu_unsupported.empty())
      throw CollectiveError(
          why_not_gpu.empty() ? cpu_unsupported : why_not_gpu + "; and " + cpu_unsupported,
          kExitBadInput);
    c.gpu = false;
    return c;
  };
  if (device == "cpu") return on_cpu("");
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(config.comm, &rank));
  // Each failure below happens on every rank alike (RunCollectively, or a check of gathered
  // facts), so --device auto can fall back everywhere at once.
  auto fallback = [&](const std::string& why, int code) {
    if (device == "cuda" || !gpu_required_by.empty()) RefuseGpu(c, why, code);
    on_cpu("--device auto: " + why);
    c.note = why + "; training on the CPU";
    return c;
  };
  // A spec the CUDA engine cannot train (common/cuda_support.hpp) is the same on every rank,
  // so each decides alone. --device cuda refuses it before looking for a GPU, so that the
  // line names the spec's field even on a machine without one.
  const std::string unsupported =
      config.spec != nullptr ? CudaEngineUnsupported(*config.spec) : std::string();
  if (device == "cuda" && !unsupported.empty())
    return fallback(unsupported + (cpu_unsupported.empty() ? "; train it with --device cpu" : ""),
                    kExitBadInput);
  try {
    RunCollectively(config.comm, [&] {
      const std::string node =
          config.node_of_rank.empty() ? mpi::Hostname() : config.node_of_rank.at(size_t(rank));
      c.mine = RequireGpu(rank, config.device, config.local_rank, node, &c.gpu_index);
    });
  } catch (const CollectiveError& e) {
    return fallback(e.what(), e.exit_code);
  }
  const std::vector<RankGpu> gpus = GatherRankGpus(config.comm, c.mine);
  // From here on every rank holds a GPU.
  c.gpu_found = true;
  // auto, with GPUs the engine cannot use for this spec: the CPU, saying why (not RefuseGpu:
  // the GPUs are not at fault, and nothing else could train it), unless a plan wants GPUs.
  if (!unsupported.empty()) return fallback(unsupported, kExitBadInput);
  const bool hierarchical = !config.node_of_rank.empty() && GpuUsesHierarchical(config.allreduce);
  if (TestSharesGpus()) {
    if (rank == 0)
      std::fprintf(stderr,
                   "dlh-launch: DLH_TEST_SHARE_GPU=1: ranks may share a GPU (a test with the "
                   "NCCL stand-in)\n");
  } else if (const std::string shared = FindSharedGpu(gpus, hierarchical); !shared.empty()) {
    RefuseGpu(c,
              shared +
                  ", and NCCL needs one GPU per rank: start at most one rank per GPU "
                  "(srun --ntasks-per-node, or mpirun -np)",
              kExitBadInput);
  }
  c.gpu = true;
  return c;
}

std::unique_ptr<Engine> BuildEngine(const DeviceChoice& c, const EngineConfig& config) {
  if (!c.gpu)
    return config.spec != nullptr && config.spec->parallel.pipelined() ? MakePipelineEngine(config)
                                                                       : MakeCpuEngine(config);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(config.comm, &rank));
  EngineConfig gpu_config = config;
  gpu_config.peer_wait = PeerWaitHooksOfThisModule();
  gpu_config.device = c.gpu_index;
  PlaceRanksNearGpus(config.comm, rank, c.mine);
  std::unique_ptr<Engine> engine;
  try {
    RunCollectively(config.comm, [&] { engine.reset(LoadCudaBackend().make(&gpu_config)); });
  } catch (const CollectiveError& e) {
    // Out of GPU memory, a broken GPU, a cuDNN that refuses the network: one error, not a
    // run on the CPU that nobody asked for.
    RefuseGpu(c, std::string("cannot train on the GPU: ") + e.what(), e.exit_code);
  }
  return engine;
}

std::unique_ptr<Engine> MakeEngine(const std::string& device, const EngineConfig& config,
                                   std::string* note, bool* gpu_found,
                                   const std::string& gpu_required_by) {
  note->clear();
  if (gpu_found) *gpu_found = false;
  const DeviceChoice c = ChooseDevice(device, config, gpu_required_by);
  *note = c.note;
  if (gpu_found) *gpu_found = c.gpu_found;
  return BuildEngine(c, config);
}

bool DeviceNoteWanted(MPI_Comm comm, bool asked) {
  int mine = asked ? 1 : 0, any = 0;
  MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_LOR, comm));
  return any != 0;
}

LayerTiming* GpuLayerTiming(Engine* engine, const std::string& device_kind) {
  if (engine == nullptr || device_kind != "cuda") return nullptr;
  const CudaBackend& b = LoadCudaBackend();
  return b.error.empty() && b.layer_timing != nullptr ? b.layer_timing(engine) : nullptr;
}

std::string DescribeCudaDevice(int device) {
  const CudaBackend& b = LoadCudaBackend();
  std::string reason = b.error;
  if (reason.empty()) {
    char text[512] = "";
    if (b.probe(text, sizeof text) <= 0) reason = text;
  }
  if (reason.empty() && b.describe == nullptr)
    reason = CudaBackendPath() + ": has no dlh_cuda_describe (a backend of another build?)";
  if (!reason.empty()) throw UsageError("no usable GPU on " + mpi::Hostname() + ": " + reason);
  std::string json(16384, '\0');
  const int n = b.describe(device, json.data(), int(json.size()));
  if (n < 0) throw UsageError("GPU " + std::to_string(device) + ": " + json.c_str());
  json.resize(size_t(n));
  return json;
}

}  // namespace dlh
