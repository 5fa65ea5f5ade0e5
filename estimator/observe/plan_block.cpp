// DLH estimator — the plan's observations block (see plan_block.hpp).
#include "estimator/observe/plan_block.hpp"

#include "estimator/observe/model_key.hpp"

namespace dlh {

void AddObservationsToPlan(const Job& job, const Cluster& cluster, const Recommendation& rec,
                           const Allocation& chosen, nlohmann::json* plan) {
  nlohmann::json o = nlohmann::json::object();
  if (!cluster.observations.empty()) {
    o["store"] = cluster.observations;
    o["limit"] = cluster.observations_limit;
  }
  // A mix is recorded as "alpha+beta": its steps are no one type's, so it corrects none.
  std::string gpu;
  for (const Part& p : chosen.parts)
    if (gpu.find(p.gpu) == std::string::npos) gpu += (gpu.empty() ? "" : "+") + p.gpu;
  o["gpu"] = gpu;
  o["model_key"] = JobModelKey(job);
  if (!job.profile) o["features"] = FeaturesRecordJson(job.features);
  (*plan)["observations"] = o;
  nlohmann::json provenance = nlohmann::json::object();
  for (const Part& p : chosen.parts) {
    auto s = rec.speeds.find(p.gpu);
    if (s != rec.speeds.end() && !s->second.provenance.empty())
      provenance[p.gpu] = s->second.provenance;
  }
  (*plan)["provenance"] = provenance;
}

std::string ChosenProvenance(const Recommendation& rec, const Allocation& chosen) {
  std::string out;
  for (const Part& p : chosen.parts) {
    auto s = rec.speeds.find(p.gpu);
    if (s == rec.speeds.end() || s->second.provenance.empty()) continue;
    if (out.find(p.gpu + ": ") != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + p.gpu + ": " + s->second.provenance;
  }
  return out;
}

}  // namespace dlh
