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
  std::map<int, Values> eval, first_eval_extra;
  for (const StoredObservation& so : store.records) {
    const Observation& r = so.record;
    if (r.gpu_type != gpu) continue;
    const bool own = so.owner == caller;
    // All of a whole job but its steps, evaluations and checkpoints: start-up, data loading,
    // the first steps' extra cost and the end (final checkpoint wait, summary).
    // The steps at the steady rate: the first epoch's excess is a cost of the job, not of
    // each step (record.hpp's later_steps).
    const double rest = r.total_s - double(r.steps) * r.steady_step_s() - r.eval_s - r.checkpoint_s;
    if (r.whole_job && r.steps > 0 && rest >= 0) {
      type_startup.add(own, rest);
      if (r.model_key == key) model_startup.add(own, rest);
    }
    if (r.model_key != key) continue;
    // One evaluation: of those after the first where the record times the first apart; the
    // first's excess over them besides (the test set's first pass).
    if (r.evaluations >= 2 && r.first_eval_s >= 0) {
      const double each = (r.eval_s - r.first_eval_s) / double(r.evaluations - 1);
      eval[r.ranks].add(own, each);
      first_eval_extra[r.ranks].add(own, std::max(0.0, r.first_eval_s - each));
    } else if (r.evaluations > 0) {
      eval[r.ranks].add(own, r.eval_s / double(r.evaluations));
    }
    if (r.checkpoints > 0) checkpoint.add(own, r.checkpoint_s / double(r.checkpoints));
  }
  LearnedPhases l;
  l.startup = (model_startup.empty() ? type_startup : model_startup).learned();
  l.checkpoint_each = checkpoint.learned();
  for (const auto& [ranks, v] : eval) l.eval_each[ranks] = v.learned();
  for (const auto& [ranks, v] : first_eval_extra) l.first_eval_extra[ranks] = v.learned();
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
    if (it != l.eval_each.end()) {
      const double predicted_each = p->eval_s / double(p->evaluations);
      p->eval_s = Resolve(it->second, predicted_each) * double(p->evaluations);
      // The first evaluation's excess, where records timed it: the caller's, or the others'
      // within the cap around a quarter of an evaluation (what the example spec's was).
      auto extra = l.first_eval_extra.find(gpus);
      if (extra != l.first_eval_extra.end())
        p->eval_s += Resolve(extra->second, 0.25 * predicted_each);
    }
  }
  if (p->checkpoints > 0 && l.checkpoint_each.any())
    p->checkpoint_s = Resolve(l.checkpoint_each, p->checkpoint_s / double(p->checkpoints)) *
                      double(p->checkpoints);
}

}  // namespace dlh
