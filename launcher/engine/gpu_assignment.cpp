// DLH — which physical GPU each rank trains on (see gpu_assignment.hpp).
#include "launcher/engine/gpu_assignment.hpp"

#include <cstdlib>
#include <map>
#include <tuple>

namespace dlh {

int GpuIndexFor(int bound, int local_rank, int visible_count) {
  if (bound >= 0) return bound;
  return visible_count > 0 ? local_rank % visible_count : 0;
}

std::string FindSharedGpu(const std::vector<RankGpu>& ranks, bool hierarchical) {
  // (communicator, host, GPU) -> the first rank seen with it.
  std::map<std::tuple<std::string, std::string, std::string>, size_t> first;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankGpu& g = ranks[r];
    const std::string comm = hierarchical ? g.node : std::string();
    auto [it, fresh] = first.emplace(std::make_tuple(comm, g.host, g.gpu), r);
    if (!fresh)
      return "ranks " + std::to_string(it->second) + " and " + std::to_string(r) + " on " + g.host +
             " both use GPU " + g.gpu;
  }
  return "";
}

bool TestSharesGpus() {
  const char* v = std::getenv("DLH_TEST_SHARE_GPU");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace dlh
