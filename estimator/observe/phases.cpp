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

// How many times over the record's ranks filled their node's cores, as CpuRankShare counts
// it for a plan: on a cluster whose nodes are one machine all the job's ranks share its
// cores, else a node's ranks its node's. 1 on a GPU, or where the cores are unknown.
double RecordCrowding(const Observation& r, const Cluster& cluster) {
  if (r.device != "cpu") return 1;
  int cores = cluster.runtime.shared_host_cores, ranks = r.ranks;
  if (cores <= 0) {
    ranks = r.ranks_per_node;
    for (const NodeType& n : cluster.node_types)
      if (n.gpu == r.gpu_type && n.cpu_cores > 0) cores = n.cpu_cores;
  }
  if (cores <= 0 || ranks <= 0) return 1;
  return Oversubscription(cores, ranks, r.threads_per_rank);
}

}  // namespace

LearnedPhases LearnPhasesFrom(const StoreContents& store, uid_t caller, const Job& job,
                              const Cluster& cluster, const std::string& gpu) {
  const std::string key = JobModelKey(job);
  Values model_startup, type_startup, launcher_startup, checkpoint;
  std::map<int, Values> eval, first_eval_extra;
  for (const StoredObservation& so : store.records) {
    const Observation& r = so.record;
    if (r.gpu_type != gpu) continue;
    const bool own = so.owner == caller;
    // All of a whole job but its steps, evaluations and checkpoints: start-up, data loading,
    // the first steps' extra cost and the end (final checkpoint wait, summary). For the
    // model's own (`rest`), the steps at the steady rate: its first epoch's excess is a cost
    // of its job, not of each step (record.hpp's later_steps). For the type
    // (`outside_steps`), all the steps: another model's first epoch ran a multiple of its own
    // step longer or shorter (measured 2026-12-04 on the project's 2-core host: the example
    // CNN's first epoch +2.2 s over its second in one job, -1.2 s in another, the MLP's
    // +0.0 s); carried to the type it predicted the MLP's 8 s job 2.2 s long.
    const double rest = r.total_s - double(r.steps) * r.steady_step_s() - r.eval_s - r.checkpoint_s;
    const double outside_steps =
        r.total_s - double(r.steps) * r.mean_step_s() - r.eval_s - r.checkpoint_s;
    // Ranks that took turns on the cores took turns through their start-up too (measured
    // 2026-12-04 on the project's 2-core host: the launcher's start-up 1.3-1.9 s at 1 and 2
    // ranks, 2.9-3.8 s at 4; all of a job but its steps 3.8-5.0 s, and 5.8-6.8 s at 4).
    const double crowding = RecordCrowding(r, cluster);
    const bool startup_known = r.startup_s >= 0 || crowding == 1;
    const double crowded_excess = r.startup_s >= 0 ? r.startup_s * (1 - 1 / crowding) : 0;
    if (r.whole_job && r.steps > 0 && startup_known) {
      if (outside_steps - crowded_excess >= 0)
        type_startup.add(own, outside_steps - crowded_excess);
      if (r.model_key == key && rest - crowded_excess >= 0)
        model_startup.add(own, rest - crowded_excess);
      if (r.startup_s >= 0) launcher_startup.add(own, r.startup_s / crowding);
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
  l.startup_is_models = !model_startup.empty();
  l.startup = (l.startup_is_models ? model_startup : type_startup).learned();
  l.launcher_startup = launcher_startup.learned();
  l.checkpoint_each = checkpoint.learned();
  for (const auto& [ranks, v] : eval) l.eval_each[ranks] = v.learned();
  for (const auto& [ranks, v] : first_eval_extra) l.first_eval_extra[ranks] = v.learned();
  return l;
}

LearnedPhases LearnPhases(const Job& job, const Cluster& cluster, const std::string& gpu) {
  if (cluster.observations.empty()) return {};
  return LearnPhasesFrom(ReadStoreCached(cluster.observations), getuid(), job, cluster, gpu);
}

void ApplyLearnedPhases(const LearnedPhases& l, int gpus, double crowding, double launch_s,
                        JobPhases* p) {
  if (l.startup.any()) {
    // A site's startup= may be below the cluster's launch_s: never more outside than all.
    const double outside = std::clamp(launch_s, 0.0, p->startup_s);
    // The model's own start-ups hold its first steps' excess; the type's do not.
    const double warmup = l.startup_is_models ? p->warmup_s : 0;
    p->startup_s = outside + Resolve(l.startup, p->startup_s - outside + p->data_s + warmup);
    p->data_s = 0;
    if (l.startup_is_models) p->warmup_s = 0;
    // The crowding's excess: the caller's launcher start-up, or the others' within the cap.
    if (crowding > 1 && l.launcher_startup.any()) {
      const bool own = l.launcher_startup.own >= 0;
      const double extra =
          (crowding - 1) * (own ? l.launcher_startup.own : l.launcher_startup.others);
      p->startup_s += own ? extra : std::min(extra, (std::exp(kOthersCapLog) - 1) * p->startup_s);
    }
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
