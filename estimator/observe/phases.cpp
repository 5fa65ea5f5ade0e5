// DLH estimator — phases learned from observations (see phases.hpp).
#include "estimator/observe/phases.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/median.hpp"
#include "estimator/observe/model_key.hpp"
#include "estimator/observe/robust.hpp"

namespace dlh {
namespace {

struct Values {
  std::vector<double> own, others;
  void add(bool mine, double v) { (mine ? own : others).push_back(v); }
  bool empty() const { return own.empty() && others.empty(); }
  LearnedValue learned() const {
    LearnedValue l;
    if (!own.empty()) l.own = Median(own);
    const std::vector<double> kept = WithoutOutliers(others);
    if (!kept.empty()) l.others = Median(kept);
    return l;
  }
};

// The caller's value, else the others' within exp(+-kOthersCapLog) of what was predicted.
double Resolve(const LearnedValue& v, double predicted) {
  if (v.own >= 0) return v.own;
  if (v.others < 0 || !(predicted > 0)) return predicted;
  return std::min(predicted * std::exp(kOthersCapLog),
                  std::max(predicted * std::exp(-kOthersCapLog), v.others));
}

}  // namespace

LearnedPhases LearnPhasesFrom(const StoreContents& store, uid_t caller, const Job& job,
                              const std::string& gpu) {
  const std::string key = JobModelKey(job);
  Values model_startup, type_startup, checkpoint;
  std::map<int, Values> eval;
  for (const StoredObservation& so : store.records) {
    const Observation& r = so.record;
    if (r.gpu_type != gpu) continue;
    const bool own = so.owner == caller;
    // All of a whole job but its steps, evaluations and checkpoints: start-up, data loading,
    // the first steps' extra cost and the end (final checkpoint wait, summary).
    const double rest = r.total_s - double(r.steps) * r.mean_step_s() - r.eval_s - r.checkpoint_s;
    if (r.whole_job && r.steps > 0 && rest >= 0) {
      type_startup.add(own, rest);
      if (r.model_key == key) model_startup.add(own, rest);
    }
    if (r.model_key != key) continue;
    if (r.evaluations > 0) eval[r.ranks].add(own, r.eval_s / double(r.evaluations));
    if (r.checkpoints > 0) checkpoint.add(own, r.checkpoint_s / double(r.checkpoints));
  }
  LearnedPhases l;
  l.startup = (model_startup.empty() ? type_startup : model_startup).learned();
  l.checkpoint_each = checkpoint.learned();
  for (const auto& [ranks, v] : eval) l.eval_each[ranks] = v.learned();
  return l;
}

LearnedPhases LearnPhases(const Job& job, const Cluster& cluster, const std::string& gpu) {
  if (cluster.observations.empty()) return {};
  return LearnPhasesFrom(ReadStoreCached(cluster.observations), getuid(), job, gpu);
}

void ApplyLearnedPhases(const LearnedPhases& l, int gpus, double launch_s, JobPhases* p) {
  if (l.startup.any()) {
    // A site's startup= may be below the cluster's launch_s: never more outside than all.
    const double outside = std::clamp(launch_s, 0.0, p->startup_s);
    p->startup_s = outside + Resolve(l.startup, p->startup_s - outside + p->data_s + p->warmup_s);
    p->data_s = p->warmup_s = 0;
  }
  if (p->evaluations > 0) {
    auto it = l.eval_each.find(gpus);
    if (it != l.eval_each.end())
      p->eval_s = Resolve(it->second, p->eval_s / double(p->evaluations)) * double(p->evaluations);
  }
  if (p->checkpoints > 0 && l.checkpoint_each.any())
    p->checkpoint_s = Resolve(l.checkpoint_each, p->checkpoint_s / double(p->checkpoints)) *
                      double(p->checkpoints);
}

}  // namespace dlh
