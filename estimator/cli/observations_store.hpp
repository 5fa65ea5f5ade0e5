// DLH — which observation store a dlh-estimate command reads: --store, else the cluster
// description's "observations" (--cluster, else $DLH_CLUSTER).
#pragma once

#include <string>

namespace dlh {

// Throws UsageError when neither names one, or when both --store and --cluster are given.
std::string StoreFromOptions(const std::string& store, const std::string& cluster);

}  // namespace dlh
