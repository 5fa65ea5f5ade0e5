// DLH estimator — a job's phases besides its steps, learned from the observation store:
// start-up (all of a whole job but its steps, evaluations and checkpoints: start-up, data
// loading, the first steps' extra cost and the run's end, each a fixed cost per job), the
// cost of one evaluation and of one checkpoint. With these a model run a second
// time on a type is predicted from its own measurements for the whole job, not only its
// steps. The caller's records count fully; others' move a phase by at most 15% (robust.hpp).
#pragma once

#include <map>
#include <string>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/job_time.hpp"
#include "estimator/observe/store_reader.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

// Medians of the caller's and of the others' records (these without outliers); < 0: none.
struct LearnedValue {
  double own = -1, others = -1;
  bool any() const { return own >= 0 || others >= 0; }
};

struct LearnedPhases {
  // The model's start-ups (as above) on the type when it has any, else the type's: of other
  // models, all of a job but all its steps (the first epoch's excess is a multiple of that
  // model's step, not a cost of the type's jobs; the planned job's own first steps stay
  // predicted, JobPhases::warmup_s). startup_is_models says which.
  LearnedValue startup;
  bool startup_is_models = false;
  // Ranks that crowd a CPU node's cores (more busy threads than cores, CpuShare::
  // oversubscribed o > 1) take turns on them through their start-up too (reading the data
  // set, building the model, MPI's set-up): a record's launcher start-up (job start to the
  // first step) is o times its uncrowded one, and `startup` holds each record's rest without
  // that excess. This is the type's launcher start-up uncrowded, each record's over its o.
  LearnedValue launcher_startup;
  LearnedValue checkpoint_each;           // the model's, per checkpoint that held up the loop
  std::map<int, LearnedValue> eval_each;  // the model's, per evaluation, by ranks
  // The model's first evaluation's excess over the others, by ranks: only from records that
  // time the first apart (Observation::first_eval_s); eval_each is then of the others.
  std::map<int, LearnedValue> first_eval_extra;
};

// From the store the cluster names, for the calling user; empty without one.
LearnedPhases LearnPhases(const Job& job, const Cluster& cluster, const std::string& gpu);
// The same from given records, for `caller`; `cluster` says how crowded each record's node was.
LearnedPhases LearnPhasesFrom(const StoreContents& store, uid_t caller, const Job& job,
                              const Cluster& cluster, const std::string& gpu);

// Replaces what `learned` knows in `p`, predicted for `gpus` ranks that fill their cores
// `crowding` times over (CpuShare::oversubscribed): start-up (data loading and warm-up
// folded into it) but `launch_s` of it, the part outside the launcher's clock that no record
// measures (the cluster's runtime.launch_s), plus the crowding's excess of the launcher's
// start-up; evaluations and checkpoints (their counts kept). Cheap: no allocation.
void ApplyLearnedPhases(const LearnedPhases& learned, int gpus, double crowding, double launch_s,
                        JobPhases* p);

}  // namespace dlh
