// DLH planning core — the GPU types a user's request allows (requested_types.hpp).
#include "estimator/plan/requested_types.hpp"

#include <algorithm>
#include <set>

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
    feature_shown = feature_shown || HasFeature(n.features, feature);
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

void CheckUserShapeFits(const UserRequest& user, const Cluster& cluster,
                        const std::vector<std::string>& allowed) {
  if (!user.nodes && !user.gpus_per_node && !user.gpus_total) return;
  std::string have;
  for (const NodeType& nt : cluster.node_types) {
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), nt.gpu) == allowed.end())
      continue;
    if (user.gpus_set && nt.cpu) continue;  // GPUs asked for are GPUs
    const bool fits = (!user.nodes || nt.nodes >= user.nodes) &&
                      (!user.gpus_per_node || nt.gpus_per_node >= user.gpus_per_node) &&
                      (!user.gpus_total || int64_t(nt.nodes) * nt.gpus_per_node >= user.gpus_total);
    if (fits) return;
    have += (have.empty() ? "" : ", ") + nt.name + " " + std::to_string(nt.nodes) +
            (nt.nodes == 1 ? " node of " : " nodes of ") + std::to_string(nt.gpus_per_node) + " " +
            (nt.cpu ? std::string("cores") : nt.gpu);
  }
  std::string asked;
  if (user.nodes) asked += "--nodes=" + std::to_string(user.nodes);
  if (user.gpus_per_node)
    asked += (asked.empty() ? "" : " and ") + std::to_string(user.gpus_per_node) + " GPUs a node";
  if (user.gpus_total)
    asked += (asked.empty() ? "" : " and ") + std::to_string(user.gpus_total) + " GPUs";
  throw UsageError("your " + asked + " fits no node type " +
                   (have.empty() ? std::string("allowed") : "(" + have + ")") +
                   (user.gpu_type.empty() ? "; a job over two types needs --dlh-auto=...,mixed"
                                          : std::string()));
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
