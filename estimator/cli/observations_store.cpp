// DLH — which observation store a command reads (see observations_store.hpp).
#include "estimator/cli/observations_store.hpp"

#include <cstdlib>

#include "common/error.hpp"
#include "estimator/cluster/cluster.hpp"

namespace dlh {

std::string StoreFromOptions(const std::string& store, const std::string& cluster) {
  if (!store.empty() && !cluster.empty())
    throw UsageError("give --store DIR or --cluster FILE, not both");
  if (!store.empty()) return store;
  std::string path = cluster;
  if (path.empty())
    if (const char* env = std::getenv("DLH_CLUSTER")) path = env;
  if (path.empty())
    throw UsageError(
        "no observation store: give --store DIR or --cluster FILE (or set DLH_CLUSTER)");
  const Cluster c = LoadCluster(path);
  if (c.observations.empty())
    throw UsageError(path + ": names no observation store (\"observations\": \"FOLDER\")");
  return c.observations;
}

}  // namespace dlh
