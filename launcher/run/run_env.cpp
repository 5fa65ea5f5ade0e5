// DLH — the environment of the program `dlh-launch run` starts (see run_env.hpp).
#include "launcher/run/run_env.hpp"

#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/error.hpp"
#include "launcher/train/batch_split.hpp"

namespace dlh {
namespace {

// The variables BuildRunEnv decides: a parent's value is dropped (replaced or unset).
const std::set<std::string>& OwnNames() {
  static const std::set<std::string> names = {"RANK",
                                              "WORLD_SIZE",
                                              "LOCAL_RANK",
                                              "LOCAL_WORLD_SIZE",
                                              "GROUP_RANK",
                                              "GROUP_WORLD_SIZE",
                                              "ROLE_NAME",
                                              "ROLE_RANK",
                                              "ROLE_WORLD_SIZE",
                                              "MASTER_ADDR",
                                              "MASTER_PORT",
                                              "TORCHELASTIC_RUN_ID",
                                              "TORCHELASTIC_RESTART_COUNT",
                                              "TORCHELASTIC_MAX_RESTARTS",
                                              "TORCHELASTIC_USE_AGENT_STORE",
                                              "DLH_RUN_DIR",
                                              "DLH_CHECKPOINT",
                                              "DLH_GLOBAL_BATCH",
                                              "DLH_BATCH",
                                              "DLH_LR",
                                              "DLH_WARMUP_EPOCHS",
                                              "DLH_RANK_BATCHES",
                                              "DLH_PROGRESS_FD"};
  return names;
}

// Open MPI's (OMPI_, and its PMIx server's PMIX_) and the PMI-1/2 variables of srun and
// other launchers (PMI_RANK, PMI_FD, ...).
bool IsLauncherVariable(const std::string& name) {
  for (const char* prefix : {"OMPI_", "PMIX_", "PMI_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string NameOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

const char* ParentValue(const std::vector<std::string>& parent, const std::string& name) {
  for (const std::string& e : parent)
    if (e.size() > name.size() && e[name.size()] == '=' && e.compare(0, name.size(), name) == 0)
      return e.c_str() + name.size() + 1;
  return nullptr;
}

// Whether the parent already set a malloc threshold that kKeepFreedMemoryTunables would set.
bool ParentChoseMallocThresholds(const std::vector<std::string>& parent) {
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"})
    if (ParentValue(parent, name)) return true;
  const char* tunables = ParentValue(parent, "GLIBC_TUNABLES");
  if (!tunables) return false;
  const std::string text = tunables;
  for (const char* name : {"glibc.malloc.trim_threshold=", "glibc.malloc.mmap_threshold="})
    if (text.find(name) != std::string::npos) return true;
  return false;
}

}  // namespace

std::string ShortestNumber(double value) {
  char text[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

int64_t PlanRankBatch(const LaunchPlan& plan, const std::string& plan_origin, int part, int rank,
                      int size) {
  if (PlanSplitsBatch(plan, false) && part >= 0 && size_t(part) < plan.parts.size())
    return plan.parts[size_t(part)].per_gpu_batch;
  if (plan.global_batch < size)
    throw UsageError(plan_origin + ": global_batch: " + std::to_string(plan.global_batch) +
                     " is smaller than the number of ranks (" + std::to_string(size) + ")");
  return EvenShare(plan.global_batch, rank, size).batch;
}

std::vector<std::string> BuildRunEnv(const RunEnvInputs& in, const std::string& plan_origin) {
  // Narrow CUDA_VISIBLE_DEVICES only when the rank has one GPU of several visible: with one
  // visible (Slurm bound it to the task) or none there is nothing to choose.
  std::string cuda_visible;
  if (in.bind_gpu && in.binding.device >= 0) {
    const std::vector<std::string> devices = VisibleDevices(in.binding.visible);
    if (devices.size() > 1 && size_t(in.binding.device) < devices.size())
      cuda_visible = devices[size_t(in.binding.device)];
  }
  const bool add_tunables = in.keep_freed_memory && !ParentChoseMallocThresholds(in.parent);
  std::vector<std::string> env;
  env.reserve(in.parent.size() + 24);
  for (const std::string& entry : in.parent) {
    const std::string name = NameOf(entry);
    if (IsLauncherVariable(name) || OwnNames().count(name)) continue;
    if (add_tunables && name == "GLIBC_TUNABLES") continue;  // set below, the parent's first
    if (!cuda_visible.empty() && name == "CUDA_VISIBLE_DEVICES") continue;
    if (!in.data.empty() && name == "DLH_DATA") continue;
    env.push_back(entry);
  }
  auto set = [&](const std::string& name, const std::string& value) {
    env.push_back(name + "=" + value);
  };
  set("RANK", std::to_string(in.rank));
  set("WORLD_SIZE", std::to_string(in.world_size));
  set("LOCAL_RANK", std::to_string(in.local_rank));
  set("LOCAL_WORLD_SIZE", std::to_string(in.local_world_size));
  set("GROUP_RANK", std::to_string(in.node));
  set("GROUP_WORLD_SIZE", std::to_string(in.num_nodes));
  // One role, as torchrun has unless told otherwise: the role's ranks are the world's.
  set("ROLE_NAME", "default");
  set("ROLE_RANK", std::to_string(in.rank));
  set("ROLE_WORLD_SIZE", std::to_string(in.world_size));
  set("MASTER_ADDR", in.master_addr);
  set("MASTER_PORT", std::to_string(in.master_port));
  set("TORCHELASTIC_RUN_ID", in.run_id);
  // A requeued Slurm job is a restart of the same run: the program may tell it from the first.
  const char* restarts = ParentValue(in.parent, "SLURM_RESTART_COUNT");
  set("TORCHELASTIC_RESTART_COUNT", restarts && *restarts ? restarts : "0");
  set("TORCHELASTIC_MAX_RESTARTS", "0");
  // "True" would make rank 0 a client of a store torchrun's agent serves; there is no agent.
  set("TORCHELASTIC_USE_AGENT_STORE", "False");
  set("DLH_RUN_DIR", in.run_dir);
  if (!in.checkpoint.empty()) set("DLH_CHECKPOINT", in.checkpoint);
  if (in.plan.present) {
    set("DLH_GLOBAL_BATCH", std::to_string(in.plan.global_batch));
    set("DLH_BATCH",
        std::to_string(PlanRankBatch(in.plan, plan_origin, in.plan_part, in.rank, in.world_size)));
    if (in.plan.lr > 0) set("DLH_LR", ShortestNumber(in.plan.lr));  // 0: a profile's, unknown
    set("DLH_WARMUP_EPOCHS", ShortestNumber(in.plan.warmup_epochs));
    // The program's sampler splits by these (share/python/dlh): which part a rank is in
    // takes the node names and GPU types only the launcher has.
    if (!in.rank_batches.empty()) {
      std::string all;
      for (int64_t b : in.rank_batches) all += (all.empty() ? "" : ",") + std::to_string(b);
      set("DLH_RANK_BATCHES", all);
    }
  }
  if (in.progress_fd >= 0) set("DLH_PROGRESS_FD", std::to_string(in.progress_fd));
  if (!in.data.empty()) set("DLH_DATA", in.data);
  if (!cuda_visible.empty()) set("CUDA_VISIBLE_DEVICES", cuda_visible);
  if (in.omp_threads > 0 && !ParentValue(in.parent, "OMP_NUM_THREADS"))
    set("OMP_NUM_THREADS", std::to_string(in.omp_threads));
  if (add_tunables) {
    const char* own = ParentValue(in.parent, "GLIBC_TUNABLES");
    set("GLIBC_TUNABLES",
        (own && *own ? std::string(own) + ":" : std::string()) + kKeepFreedMemoryTunables);
  }
  return env;
}

int OfferedThreads(const RunEnvInputs& in) {
  if (const char* own = ParentValue(in.parent, "OMP_NUM_THREADS")) {
    const int threads = std::atoi(own);
    return threads > 0 ? threads : 0;
  }
  return in.omp_threads;
}

}  // namespace dlh
