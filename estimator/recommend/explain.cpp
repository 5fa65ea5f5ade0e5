// DLH estimator — the recommender's `why` lines: each ranked allocation against the winner,
// the fastest one, and why a candidate was left out.
#include <cmath>
#include <string>
#include <vector>

#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh::recommend_detail {

// "the 3h deadline", or "" without a deadline.
std::string DeadlineText(const Job& job) {
  return job.deadline_s > 0 ? "the " + Duration(job.deadline_s) + " deadline" : std::string();
}

// Why lines of the ranked allocations (best first), in the objective's terms so that the
// table reads as a comparison: the winner against the field (`feasible` allocations), the
// others against the winner.
void ExplainRanked(const Job& job, int feasible, std::vector<Allocation>* ranked) {
  const std::string among =
      job.deadline_s > 0 ? " meeting " + DeadlineText(job) : " that fit in memory";
  std::vector<Allocation>& r = *ranked;
  const Allocation& top = r.front();
  const std::string of = feasible == 1 ? std::string("only allocation") + among
                                       : " of " + std::to_string(feasible) + " allocations" + among;
  switch (job.objective) {
    case Objective::Energy:
      r[0].why = (feasible == 1 ? of : "least energy" + of) + " (" + FormatEnergy(top.energy_j) +
                 ", " + Duration(top.total_s) + ")";
      break;
    case Objective::Time:
      r[0].why = (feasible == 1 ? of : "fastest" + of) + " (" + Duration(top.total_s) + ", " +
                 FormatEnergy(top.energy_j) + ")";
      break;
    case Objective::GpuHours:
      r[0].why = (feasible == 1 ? of : "fewest GPU-hours" + of) + " (" + GpuHours(top.gpu_hours) +
                 ", " + Duration(top.total_s) + ")";
      break;
  }
  for (size_t i = 1; i < r.size(); ++i) {
    Allocation& a = r[i];
    const double dt = a.total_s - top.total_s;
    const std::string time = std::fabs(dt) < 1
                                 ? "same time"
                                 : Duration(std::fabs(dt)) + (dt < 0 ? " faster" : " slower");
    switch (job.objective) {
      case Objective::Energy:
        a.why = Percent(a.energy_j / top.energy_j) + " energy, " + time;
        break;
      case Objective::Time: {
        const double q = a.energy_j / top.energy_j;
        a.why = time + ", " +
                (std::fabs(q - 1) < 0.0005 ? std::string("same energy")
                                           : Printf(std::fabs(q - 1) < 0.01 ? "%.1f%%" : "%.0f%%",
                                                    std::fabs(q - 1) * 100) +
                                                 (q < 1 ? " less energy" : " more energy"));
        break;
      }
      case Objective::GpuHours:
        a.why = Percent(a.gpu_hours / top.gpu_hours) + " GPU-hours, " + time;
        break;
    }
  }
}

// The fastest allocation's why line (and miss_s): when nothing meets the deadline it is the
// answer, so it says by how much it misses; otherwise it is the reference for "how fast
// could this go", among the `fitting` allocations that fit in memory.
void ExplainFastest(const Job& job, int fitting, Recommendation* rec) {
  Allocation& f = rec->fastest;
  if (!rec->feasible) {
    rec->miss_s = f.total_s * (1 + job.margin) - job.deadline_s;
    f.why = "fastest allocation misses " + DeadlineText(job) + " by " + Duration(rec->miss_s) +
            " (" + Duration(f.total_s) + " predicted, " + Printf("%.0f", job.margin * 100) +
            "% margin)";
  } else {
    f.why = "fastest of " + std::to_string(fitting) + " allocations that fit in memory (" +
            Duration(f.total_s) + ", " + FormatEnergy(f.energy_j) + ")";
  }
}

// Why a candidate is left out: memory first (its time would not matter), else the deadline.
std::string WhyRejected(const Job& job, const std::vector<TypeInfo>& ti, const Cand& c, int slots) {
  for (int p = 0; p < c.parts && !c.fits; ++p) {
    const TypeInfo& t = ti[size_t(c.type[p])];
    if (c.batch[p] <= t.max_batch) continue;
    return "out of memory: " + Printf("%.3g", RankMemoryBytes(job, t, c.batch[p], slots) / 1e9) +
           " GB per GPU at batch " + std::to_string(c.batch[p]) + ", " +
           Printf("%.3g", kUsableMemory * t.gpu->memory_gb) + " GB usable on " + t.gpu->name;
  }
  return "misses " + DeadlineText(job) + ": " + Duration(c.total_s) + " predicted, " +
         Duration(c.total_s * (1 + job.margin)) + " with the " + Printf("%.0f", job.margin * 100) +
         "% margin";
}

}  // namespace dlh::recommend_detail
