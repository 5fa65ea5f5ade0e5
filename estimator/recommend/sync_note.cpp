// DLH estimator — how the chosen allocation keeps its ranks' models together, and what local
// SGD would change; whether it is a pipeline, and why (SyncNote, PipelineNote in
// recommender.hpp).
#include <cstdio>
#include <string>

#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {
namespace {

// Communication share of the step from which local SGD is worth a line: below it the
// allreduce is a small part of the time, and local SGD's accuracy cost buys little.
constexpr double kCommBoundShare = 0.25;
constexpr int kSuggestedPeriod = 16;

std::string Ms(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 0.01 ? "%.2f ms" : "%.1f ms", s * 1e3);
  return text;
}

}  // namespace

std::string SyncNote(const Job& job, const Allocation& a) {
  if (job.profile || a.gpus <= 1 || !(a.step_s > 0)) return {};
  // Scaled from the allocation's own figure, linear in the bytes: "about".
  const double average_ratio = recommend_detail::ModelAverageToGradientBytes(job);
  if (job.spec.sync.local_sgd()) {
    const int period = job.spec.sync.period;
    return "local SGD from the spec, period " + std::to_string(period) +
           ": one model average every " + std::to_string(period) + " steps, " + Ms(a.comm_s) +
           " of communication a step against about " + Ms(a.comm_s * period / average_ratio) +
           " synchronously";
  }
  if (job.spec.sync.stale_sync()) {
    const int s = job.spec.sync.staleness;
    if (s == 0)
      return "stale-synchronous from the spec with staleness 0: each step waits for its sums";
    return "stale-synchronous from the spec, staleness " + std::to_string(s) +
           ": each step's allreduce runs beside the next steps' compute; " + Ms(a.comm_s) +
           " of it a step left to wait for (a step takes the longer of the two)";
  }
  const double share = a.comm_s / a.step_s;
  if (share < kCommBoundShare) return {};
  return "communication is " + std::to_string(int(share * 100 + 0.5)) +
         "% of the step: local SGD (\"sync\": {\"mode\": \"local_sgd\", \"period\": " +
         std::to_string(kSuggestedPeriod) + "} in the spec) would make it about " +
         Ms(a.comm_s * average_ratio / kSuggestedPeriod) +
         " a step; its accuracy cost: BENCHMARKS.md, \"Local SGD\"";
}

std::string PipelineNote(const Recommendation& rec, const Allocation& a) {
  if (a.pipeline_stages <= 1) return {};
  const int p = a.pipeline_stages, m = a.micro_batches;
  return "pipeline of " + std::to_string(p) + " stages, " + std::to_string(m) +
         " micro-batches (bubble " + std::to_string(int(100.0 * a.bubble + 0.5)) +
         "% of a step), " + Si(a.memory_bytes) + "B a GPU" +
         (rec.pipeline_why.empty() ? std::string() : ": " + rec.pipeline_why);
}

}  // namespace dlh
