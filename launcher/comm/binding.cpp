// DLH — rank-to-device binding (see binding.hpp).
#include "launcher/comm/binding.hpp"

#include <cstdlib>
#include <sstream>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

bool ParseNonNegative(const char* text, int* out) {
  if (!text || !*text) return false;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 20) return false;
  *out = int(v);
  return true;
}

}  // namespace

std::string Binding::describe() const {
  std::string s = "local rank " + std::to_string(local_rank) + " (" + local_rank_source + "), ";
  // Unbound is not GPU-less: without CUDA_VISIBLE_DEVICES the engine picks a GPU by local
  // rank itself (its device name follows this line), and a CPU rank says "cpu" there.
  if (visible.empty()) return s + "CUDA_VISIBLE_DEVICES unset";
  if (device < 0) return s + "no GPU visible (CUDA_VISIBLE_DEVICES=" + visible + ")";
  return s + "GPU " + VisibleDevices(visible)[size_t(device)] +
         " of CUDA_VISIBLE_DEVICES=" + visible;
}

std::vector<std::string> VisibleDevices(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Binding BindRank(const std::function<const char*(const char*)>& getenv, int node_local_rank) {
  Binding b;
  if (ParseNonNegative(getenv("SLURM_LOCALID"), &b.local_rank)) {
    b.local_rank_source = "SLURM_LOCALID";
  } else if (ParseNonNegative(getenv("OMPI_COMM_WORLD_LOCAL_RANK"), &b.local_rank)) {
    b.local_rank_source = "OMPI_COMM_WORLD_LOCAL_RANK";
  } else {
    b.local_rank = node_local_rank;
    b.local_rank_source = "node communicator";
  }
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  b.visible = visible ? visible : "";
  const std::vector<std::string> devices = VisibleDevices(b.visible);
  const bool listed = !devices.empty() && b.visible != "NoDevFiles";
  if (listed) b.gpus_given = "CUDA_VISIBLE_DEVICES=" + b.visible;
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const char* value = getenv(name);
    if (b.gpus_given.empty() && value && *value) b.gpus_given = name + std::string("=") + value;
  }
  int on_node = 0;
  if (b.gpus_given.empty() && ParseNonNegative(getenv("SLURM_GPUS_ON_NODE"), &on_node) &&
      on_node > 0)
    b.gpus_given = "SLURM_GPUS_ON_NODE=" + std::to_string(on_node);
  if (!listed) return b;
  if (devices.size() == 1) {
    b.device = 0;  // Slurm bound one GPU to this task
  } else if (b.local_rank < int(devices.size())) {
    b.device = b.local_rank;
  } else {
    throw UsageError("local rank " + std::to_string(b.local_rank) + " on this node, but only " +
                     std::to_string(devices.size()) + " GPUs are visible (CUDA_VISIBLE_DEVICES=" +
                     b.visible + "): start one rank per GPU");
  }
  return b;
}

}  // namespace dlh
