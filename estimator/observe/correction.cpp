// DLH estimator — predictions corrected by observations (see correction.hpp).
#include "estimator/observe/correction.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "estimator/model/job_time.hpp"
#include "estimator/observe/model_key.hpp"
#include "estimator/observe/robust.hpp"

namespace dlh {
namespace {

std::string Runs(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string PercentText(double log_factor) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.0f%%", 100 * (std::exp(log_factor) - 1));
  return buf;
}

}  // namespace

double PredictedCompute(const Observation& r, const DeviceSpeed& s, const Cluster& cluster,
                        const std::string& gpu) {
  CpuShare share;
  if (s.cpu_threads > 0) {
    if (cluster.runtime.shared_host_cores > 0) {
      share = CpuRankShare(s.cpu_threads, cluster.runtime.shared_host_cores, r.ranks);
    } else {
      int cores = s.cpu_threads;
      for (const NodeType& n : cluster.node_types)
        if (n.gpu == gpu && n.cpu_cores > 0) cores = n.cpu_cores;
      share = CpuRankShare(s.cpu_threads, cores, r.ranks_per_node);
    }
  }
  return s.fixed_s * share.fixed + s.per_sample_s * share.per_sample * double(r.per_rank_batch);
}

std::string BaseProvenance(const std::string& gpu, const DeviceSpeed& s) {
  if (!s.provenance.empty()) return s.provenance;
  const std::string calibrated = "calibrated (";
  if (s.source.rfind(calibrated, 0) == 0)
    return "calibration " + gpu + " (" + s.source.substr(calibrated.size());
  return s.source;
}

void ApplyObservationsFrom(const StoreContents& store, uid_t caller, const Job& job,
                           const Cluster& cluster, std::map<std::string, DeviceSpeed>* speeds) {
  const std::string key = JobModelKey(job);
  const char* what = job.profile ? "this program" : "this spec";
  for (auto& [gpu, s] : *speeds) {
    const std::string base = BaseProvenance(gpu, s);
    s.provenance = base;
    Residuals model, type;
    for (const StoredObservation& so : store.records) {
      const Observation& r = so.record;
      if (r.gpu_type != gpu) continue;
      // The allreduce the plan predicted stays: observations correct the compute model.
      const double comm = r.has_prediction ? r.predicted_comm_s : 0;
      const double compute = PredictedCompute(r, s, cluster, gpu);
      if (!(compute > 0) || !(r.step_s - comm > 0)) continue;
      const double residual = std::log((r.step_s - comm) / compute);
      if (!std::isfinite(residual)) continue;
      const bool own = so.owner == caller;
      (own ? type.own : type.others).push_back(residual);
      if (r.model_key == key) (own ? model.own : model.others).push_back(residual);
    }
    Combined c;
    std::string provenance;
    if (!model.own.empty() || !model.others.empty()) {
      c = ModelHistory(model);
      provenance =
          "from " + Runs(c.runs, "earlier run", "earlier runs") + " of " + what + " on " + gpu;
      if (c.own == 0) provenance += " by other users (" + PercentText(c.log_factor) + ", capped)";
    } else if (!type.own.empty() || !type.others.empty()) {
      c = TypeCorrection(type);
      provenance = base + ", corrected by " + Runs(c.runs, "job", "jobs") + " (" +
                   PercentText(c.log_factor) + ")";
    }
    if (c.runs == 0) continue;
    const double f = std::exp(c.log_factor);
    s.fixed_s *= f;
    s.per_sample_s *= f;
    s.observed_runs = c.runs;
    s.log_sigma = std::hypot(s.log_sigma, c.log_sigma);
    s.provenance = provenance;
  }
}

void ApplyObservations(const Job& job, const Cluster& cluster,
                       std::map<std::string, DeviceSpeed>* speeds) {
  if (cluster.observations.empty()) {
    for (auto& [gpu, s] : *speeds) s.provenance = BaseProvenance(gpu, s);
    return;
  }
  ApplyObservationsFrom(ReadStoreCached(cluster.observations), getuid(), job, cluster, speeds);
}

}  // namespace dlh
