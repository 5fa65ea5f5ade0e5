// DLH fuzz target — the cluster description (dlh::ParseCluster), a site file read by the
// SPANK plugin inside sbatch and by dlh-estimate. Refusals are EstimateError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "estimator/cluster/cluster.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dlh::fuzz::RefusesOnlyWith<dlh::EstimateError>("ParseCluster", [&] {
    const dlh::Cluster c = dlh::ParseCluster(text, "cluster.json", "/etc/dlh");
    for (const dlh::NodeType& n : c.node_types)
      if (!c.gpu(n.gpu)) std::abort();  // ParseCluster promises every node's GPU type exists
  });
  return 0;
}
