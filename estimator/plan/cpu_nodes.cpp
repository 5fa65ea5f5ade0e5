// DLH planning core — CPU node types in the pool (see cpu_nodes.hpp).
#include "estimator/plan/cpu_nodes.hpp"

#include <algorithm>

#include "common/duration.hpp"
#include "common/error.hpp"
#include "estimator/plan/plan.hpp"

namespace dlh::plan {

std::vector<std::string> GpuTypesOnly(const std::vector<std::string>& allowed,
                                      const Cluster& cluster) {
  std::vector<std::string> out;
  for (const GpuType& g : cluster.gpu_types)
    if (!g.cpu &&
        (allowed.empty() || std::find(allowed.begin(), allowed.end(), g.name) != allowed.end()))
      out.push_back(g.name);
  return out;
}

bool IsCpuPlan(const Allocation& a) { return !a.parts.empty() && a.parts[0].cpu; }

std::vector<SlurmSetting> CpuSlurmSettings(const Allocation& a, const std::string& time_limit,
                                           const UserRequest& user, const Cluster& cluster) {
  const Part& p = a.parts.at(0);
  const NodeType* nt = cluster.node_type(p.node_type);
  if (!nt) throw Error("CpuSlurmSettings: unknown node type " + p.node_type);
  return {
      {"nodes", std::to_string(a.nodes), !user.nodes_set},
      {"ntasks-per-node", std::to_string(p.gpus_per_node),
       !user.ntasks_set && !user.ntasks_per_node_set},
      {"cpus-per-task", std::to_string(p.threads_per_rank), !user.cpus_per_task_set},
      {"constraint", nt->slurm_feature(), !user.constraint_set},
      {"time", time_limit, !user.time_set},
  };
}

std::string CpuChoiceNote(const Job& job, const Cluster& now, const Allocation& chosen) {
  const std::vector<std::string> gpus = GpuTypesOnly(job.allowed_types, now);
  if (gpus.empty())
    return "on CPU nodes: " + std::string(job.allowed_types.empty() ? "the cluster has no GPU type"
                                                                    : "types= allows no GPU type");
  Job gpu_job = job;
  gpu_job.allowed_types = gpus;
  gpu_job.top = 1;
  gpu_job.rejected = 0;
  Recommendation rec;
  try {
    rec = Recommend(gpu_job, now);
  } catch (const EstimateError&) {  // no GPU node free (or none fits): the CPUs are the answer
    return "on CPU nodes: no GPU node that can take this job is free now";
  }
  if (!rec.feasible)
    return "on CPU nodes: no GPU allocation free now meets the deadline (the fastest, " +
           AllocationText(rec.fastest) + ", needs " + HumanDuration(rec.fastest.total_s) + ")";
  const Allocation& best = rec.ranked.front();
  const char* what = job.objective == Objective::Time       ? "faster than"
                     : job.objective == Objective::GpuHours ? "fewer device-hours than"
                                                            : "less energy than";
  return "on CPU nodes: " + std::string(what) + " the best GPU plan free now, " +
         AllocationText(best) + " (" + FormatEnergy(best.energy_j) + ", " +
         HumanDuration(best.total_s) + " against " + FormatEnergy(chosen.energy_j) + ", " +
         HumanDuration(chosen.total_s) + ")";
}

}  // namespace dlh::plan
