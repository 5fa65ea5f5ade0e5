// DLH planning core — the GPU types a user's request allows (requested_types.hpp).
#include "estimator/plan/requested_types.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "estimator/plan/cpu_nodes.hpp"

namespace dlh::plan {

void PinUntypedGpus(const UserRequest& user, const Cluster& cluster,
                    const std::vector<LiveNode>& live, const std::string& live_error,
                    PlanOutcome* out) {
  const Allocation& a = out->chosen;
  if (!out->feasible || a.parts.size() != 1 || IsCpuPlan(a) || !user.gpus_set ||
      !user.gpu_type.empty() || user.constraint_set || !live_error.empty())
    return;
  const NodeType* nt = cluster.node_type(a.parts[0].node_type);
  if (!nt) return;
  const std::string& feature = nt->slurm_feature();
  bool feature_shown = false;
  std::set<std::string> other_types;
  for (const LiveNode& n : live) {
    std::stringstream features(n.features);
    for (std::string f; std::getline(features, f, ',');)
      feature_shown = feature_shown || f == feature;
    for (const GresItem& g : ParseGres(n.gres))
      if (g.name == "gpu" && !g.type.empty() && g.type != a.parts[0].gpu)
        other_types.insert(g.type);
  }
  if (other_types.empty()) return;
  std::string others;
  for (const std::string& t : other_types) others += (others.empty() ? "" : ", ") + t;
  if (feature_shown) {
    out->settings.push_back({"constraint", feature, true});
    out->type_note = "your GPU request names no type: kept to " + a.parts[0].gpu +
                     ", the type planned (--constraint=" + feature + "), not " + others;
  } else {
    out->type_note = "warning: your GPU request names no type and no node shows the feature '" +
                     feature + "': Slurm may start it on " + others +
                     ", which this plan and its "
                     "time limit are not for (name the type: --gres=gpu:" +
                     a.parts[0].gpu + ":N)";
  }
}

std::vector<std::string> TypesOfConstraint(const UserRequest& user, const Cluster& cluster,
                                           const std::vector<std::string>& allowed) {
  std::string constraint;
  for (const auto& [name, value] : user.given)
    if (name == "constraint") constraint = value;
  std::vector<std::string> types;
  for (const NodeType& nt : cluster.node_types)
    if (nt.slurm_feature() == constraint &&
        std::find(types.begin(), types.end(), nt.gpu) == types.end())
      types.push_back(nt.gpu);
  if (types.empty()) return allowed;
  std::vector<std::string> out;
  for (const std::string& t : types)
    if (allowed.empty() || std::find(allowed.begin(), allowed.end(), t) != allowed.end())
      out.push_back(t);
  if (out.empty()) {
    std::string names;
    for (const std::string& t : types) names += (names.empty() ? "" : ", ") + t;
    throw UsageError("--constraint=" + constraint + ": picks " + names +
                     " nodes, which your --gres/--gpus or types= rule out");
  }
  return out;
}

}  // namespace dlh::plan
