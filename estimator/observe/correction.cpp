// DLH estimator — predictions corrected by observations (see correction.hpp).
#include "estimator/observe/correction.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "common/spec.hpp"
#include "estimator/model/features.hpp"
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

namespace {

// The calibrated speed on `gpu` of the model a record of ANOTHER model ran: a record is
// judged against its own model's prediction, never against the planned job's (a residual of
// an MLP's step over a CNN's prediction says nothing about the type). From the record's spec;
// none for a program (its profile is not in the store) or a spec that no longer parses.
// Cached by model key: a store holds many runs of few models.
const DeviceSpeed* RecordModelSpeed(const Observation& r, const Job& job, const Cluster& cluster,
                                    const std::string& gpu,
                                    std::map<std::string, std::optional<DeviceSpeed>>* cache) {
  auto it = cache->find(r.model_key);
  if (it == cache->end()) {
    std::optional<DeviceSpeed> speed;
    if (r.spec.is_object()) {
      try {
        Job other = job;
        other.profile.reset();
        other.spec = ParseSpec(r.spec.dump(), "observation", "");
        other.features = ComputeFeatures(other.spec);
        other.allowed_types = {gpu};
        const auto speeds = CalibratedDeviceSpeeds(other, cluster);
        if (auto s = speeds.find(gpu); s != speeds.end()) speed = s->second;
      } catch (const std::exception&) {  // a record the reader cannot judge is left out
      }
    }
    it = cache->emplace(r.model_key, speed).first;
  }
  return it->second ? &*it->second : nullptr;
}

}  // namespace

void ApplyObservationsFrom(const StoreContents& store, uid_t caller, const Job& job,
                           const Cluster& cluster, std::map<std::string, DeviceSpeed>* speeds) {
  const std::string key = JobModelKey(job);
  const char* what = job.profile ? "this program" : "this spec";
  for (auto& [gpu, s] : *speeds) {
    const std::string base = BaseProvenance(gpu, s);
    s.provenance = base;
    Residuals model, type;
    std::map<std::string, std::optional<DeviceSpeed>> other_models;
    for (const StoredObservation& so : store.records) {
      const Observation& r = so.record;
      if (r.gpu_type != gpu) continue;
      // The allreduce the plan predicted stays: observations correct the compute model.
      const double comm = r.has_prediction ? r.predicted_comm_s : 0;
      const DeviceSpeed* own_model =
          r.model_key == key ? &s : RecordModelSpeed(r, job, cluster, gpu, &other_models);
      if (!own_model) continue;
      const double compute = PredictedCompute(r, *own_model, cluster, gpu);
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
