// DLH — each rank's share of the global batch (see batch_split.hpp).
#include "launcher/train/batch_split.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace dlh {
namespace {

// "alpha, beta": the types a rank may name.
std::string PartNames(const LaunchPlan& plan) {
  std::string out;
  for (size_t i = 0; i < plan.parts.size(); ++i) out += (i ? ", " : "") + plan.parts[i].gpu;
  return out;
}

// "alpha 1, beta 1": the plan's GPUs per part.
std::string PartGpus(const LaunchPlan& plan) {
  std::string out;
  for (size_t i = 0; i < plan.parts.size(); ++i)
    out += (i ? ", " : "") + plan.parts[i].gpu + " " + std::to_string(plan.parts[i].gpus());
  return out;
}

}  // namespace

RankShare EvenShare(int64_t global, int rank, int size) {
  const int64_t base = global / size, extra = global % size;
  RankShare s;
  s.batch = base + (rank < extra ? 1 : 0);
  s.offset = rank * base + std::min<int64_t>(rank, extra);
  return s;
}

bool PlanSplitsBatch(const LaunchPlan& plan, bool batch_overridden) {
  return plan.present && plan.parts.size() >= 2 && !batch_overridden;
}

int PartOfRank(const LaunchPlan& plan, const std::string& plan_origin, const std::string& gpu_type,
               const std::string& type_origin, const std::string& node_name, int rank, int size) {
  const int n = int(plan.parts.size());
  if (!gpu_type.empty()) {
    // The GRES type first; a node type only when no part has that GPU type, so that two
    // parts of one GPU type on different node types can still be told apart.
    for (const bool by_gpu : {true, false}) {
      int found = -1, matches = 0;
      for (int i = 0; i < n; ++i) {
        const PlanPart& p = plan.parts[size_t(i)];
        if ((by_gpu ? p.gpu : p.node_type) != gpu_type) continue;
        found = i;
        ++matches;
      }
      if (matches == 1) return found;
      if (matches > 1)
        throw UsageError(type_origin + ": '" + gpu_type + "' (rank " + std::to_string(rank) +
                         ") matches " + std::to_string(matches) + " parts of " + plan_origin +
                         " allocation.parts; name the node_type instead");
    }
    throw UsageError(type_origin + ": '" + gpu_type + "' (rank " + std::to_string(rank) +
                     ") is not a GPU type of " + plan_origin + " allocation.parts (" +
                     PartNames(plan) + ")");
  }
  const bool named = std::any_of(plan.parts.begin(), plan.parts.end(),
                                 [](const PlanPart& p) { return !p.node_names.empty(); });
  if (named && !node_name.empty()) {
    int found = -1, matches = 0;
    for (int i = 0; i < n; ++i) {
      const auto& names = plan.parts[size_t(i)].node_names;
      if (std::find(names.begin(), names.end(), node_name) == names.end()) continue;
      found = i;
      ++matches;
    }
    if (matches == 1) return found;
    throw UsageError(plan_origin + ": allocation.parts: node '" + node_name + "' (rank " +
                     std::to_string(rank) + ", SLURMD_NODENAME) is in " +
                     (matches ? std::to_string(matches) + " parts'" : std::string("no part's")) +
                     " node_names; give each rank its type with --gpu-type or DLH_GPU_TYPE");
  }
  int64_t planned = 0;
  for (const PlanPart& p : plan.parts) planned += p.gpus();
  if (planned != size)
    throw UsageError(plan_origin + ": allocation.parts: the plan is for " +
                     std::to_string(planned) + " GPUs (" + PartGpus(plan) + ") but " +
                     std::to_string(size) +
                     " ranks run; give each rank its type with --gpu-type or DLH_GPU_TYPE");
  int64_t end = 0;
  for (int i = 0; i < n; ++i) {
    end += plan.parts[size_t(i)].gpus();
    if (rank < end) return i;
  }
  throw Error("PartOfRank: rank " + std::to_string(rank) + " past the plan (internal error)");
}

std::vector<int64_t> SplitOffsets(const std::vector<int64_t>& batches,
                                  const std::vector<int>& part_of_rank, const LaunchPlan& plan,
                                  const std::string& plan_origin, int64_t global) {
  std::vector<int64_t> offsets(batches.size(), 0);
  int64_t sum = 0;
  for (size_t r = 0; r < batches.size(); ++r) {
    offsets[r] = sum;
    sum += batches[r];
  }
  if (sum == global) return offsets;
  std::vector<int64_t> ranks(plan.parts.size(), 0);
  for (int p : part_of_rank)
    if (p >= 0 && size_t(p) < ranks.size()) ++ranks[size_t(p)];
  std::string how;
  for (size_t i = 0; i < plan.parts.size(); ++i)
    how += (i ? ", " : "") + plan.parts[i].gpu + ": " + std::to_string(ranks[i]) + " x " +
           std::to_string(plan.parts[i].per_gpu_batch);
  throw UsageError(plan_origin + ": allocation.parts: the per_gpu_batch of the " +
                   std::to_string(batches.size()) + " ranks sum to " + std::to_string(sum) + " (" +
                   how + "), not global_batch " + std::to_string(global));
}

std::string FormatBatches(const std::vector<int64_t>& batches) {
  std::string out = "[";
  for (size_t i = 0; i < batches.size(); ++i) out += (i ? ", " : "") + std::to_string(batches[i]);
  return out + "]";
}

}  // namespace dlh
