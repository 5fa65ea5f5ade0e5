// DLH — the Trainer's observation record (launcher/observe/): what this run measured, where
// it ran and what its plan predicted, into the site's store, so that the estimator learns
// from every job (docs/reference/observations.md).
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "common/median.hpp"
#include "common/spec_json.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "launcher/observe/record_probe.hpp"
#include "launcher/observe/store.hpp"
#include "launcher/train/trainer_impl.hpp"

namespace dlh {
namespace trainer_detail {
namespace {

std::string UserName() {
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

}  // namespace

std::string Trainer::observation_store() const {
  return !o_.observations.empty() ? o_.observations : plan_.observations_store;
}

// A run that trained fewer than 3 steps measured no step time worth keeping.
bool Trainer::observation_due() const {
  return rank_ == 0 && !observation_store().empty() && step_seconds_.size() >= 3;
}

// The record's probe of this node (launcher/observe/record_probe.hpp) runs before the
// summary takes the run's wall time: the job pays for it, so the whole-job time it records
// and a later plan learns from must include it.
nlohmann::json Trainer::probe_for_observation() const {
  return observation_due() ? NodeProbeForRecord(engine_->device_name()) : nlohmann::json();
}

// Rank 0, after summary.json. A store that is missing, unsafe or full is one warning: the
// run itself succeeded, and its record is only a lesson for later plans.
void Trainer::write_observation(const nlohmann::json& summary, double wall_s, double startup_s,
                                const nlohmann::json& node_probe) {
  if (!observation_due()) return;
  const std::string store = observation_store();
  try {
    Observation r;
    r.created = RecordTimeNow();
    r.user = UserName();
    r.command = "train";
    r.model_name = spec_.name;
    r.spec = nlohmann::json::parse(SpecToJson(spec_, "unknown").dump());
    // The plan's key and features are the estimator's; without a plan the reader computes
    // them from the spec (the launcher has no feature arithmetic of its own).
    if (!plan_.model_features.empty()) r.features = nlohmann::json::parse(plan_.model_features);
    r.model_key = !plan_.model_key.empty() ? plan_.model_key : ModelKey(r.spec.dump());
    // The store is readable by every user, and its readers take a model from the spec's
    // layers: the data set's folder (a user's private path) stays out, its file name stays.
    if (r.spec.contains("dataset") && r.spec["dataset"].is_string()) {
      const std::string name =
          std::filesystem::path(r.spec["dataset"].get<std::string>()).filename().string();
      r.spec["dataset"] = name.empty() ? "unknown" : name;
    }
    r.gpu_type = plan_.observations_gpu;
    if (r.gpu_type.empty()) r.gpu_type = o_.gpu_type;
    if (r.gpu_type.empty() && plan_.parts.size() == 1) r.gpu_type = plan_.parts[0].gpu;
    r.device = engine_->device_name();
    r.probe = node_probe;
    r.ranks = size_;
    r.threads_per_rank = CpuThreads();
    r.ranks_per_node = local_.size();
    r.gpus_per_node = r.device.rfind("cuda", 0) == 0 ? local_.size() : 0;
    const std::set<std::string> hosts(node_of_rank_.begin(), node_of_rank_.end());
    r.hosts.assign(hosts.begin(), hosts.end());
    r.global_batch = spec_.batch_size;
    r.per_rank_batch = rank_batches_.empty()
                           ? spec_.batch_size
                           : *std::max_element(rank_batches_.begin(), rank_batches_.end());
    r.step_s = Median(step_seconds_);
    r.steps = int64_t(step_seconds_.size());
    r.steps_s = std::accumulate(step_seconds_.begin(), step_seconds_.end(), 0.0);
    // The steps after this run's first epoch's worth: a record of a longer job's steps
    // without the first epoch's excess (record.hpp).
    if (steps_per_epoch_ > 0 && int64_t(step_seconds_.size()) > steps_per_epoch_) {
      r.later_steps = int64_t(step_seconds_.size()) - steps_per_epoch_;
      r.later_steps_s =
          std::accumulate(step_seconds_.begin() + steps_per_epoch_, step_seconds_.end(), 0.0);
    }
    // The fastest rank's wait in the allreduce (record.hpp): summary.json's per-rank means.
    const nlohmann::json& ranks_allreduce = summary.at("rank_step_seconds").at("allreduce");
    if (!ranks_allreduce.empty())
      r.allreduce_s =
          std::min_element(ranks_allreduce.begin(), ranks_allreduce.end())->get<double>();
    r.startup_s = first_step_ == 0 ? startup_s : -1;
    r.eval_s = eval_seconds_;
    r.evaluations = evaluations_;
    r.first_eval_s = first_eval_seconds_;
    r.checkpoint_s = checkpoint_seconds_;
    r.checkpoints = checkpoint_stops_;
    r.total_s = wall_s;
    r.whole_job = result_.finished && first_step_ == 0;
    const nlohmann::json& energy = summary.at("energy");
    if (energy.value("measured", false) && energy.contains("joules_total") &&
        energy["joules_total"].is_number())
      r.energy_j = energy["joules_total"].get<double>();
    if (plan_.present && plan_.predicted_step_s > 0) {
      r.has_prediction = true;
      r.predicted_step_s = plan_.predicted_step_s;
      r.predicted_compute_s = plan_.predicted_compute_s;
      r.predicted_comm_s = plan_.predicted_comm_s;
      r.predicted_total_s = plan_.predicted_total_s;
    }
    const StoreWrite w = WriteObservation(store, r, plan_.observations_limit);
    say(w.written ? "observation: " + w.path : "warning: " + w.warning);
  } catch (const std::exception& e) {
    say(std::string("warning: observation record not written: ") + e.what());
  }
}

}  // namespace trainer_detail
}  // namespace dlh
