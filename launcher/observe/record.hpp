// DLH — an observation record: what one finished job measured, where it ran and what its
// plan predicted (issue 40, "every job teaches the estimator"). The built-in trainer and
// `dlh-launch run --` write one at their end into the site's observation store (store.hpp);
// the estimator reads the store and corrects its predictions (estimator/observe/). The JSON
// form is documented in docs/reference/observations.md; every error names the file and the
// field: "store/a.json: measured.step_s: must be a positive number, got 0".
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {

// The format tag ("dlh_observation": 1) a record carries; readers refuse any other.
constexpr int kObservationVersion = 1;
// No record is larger: a bigger file is foreign or damaged, and a reader never loads it.
constexpr size_t kMaxObservationBytes = 64 * 1024;
// Records a store holds before writers skip theirs (the cluster's "observations_limit").
constexpr int64_t kDefaultObservationLimit = 10000;

// A record that cannot be read: "<origin>: <field>: <what is wrong>".
struct RecordError : Error {
  using Error::Error;
};

struct Observation {
  std::string created;  // ISO 8601 UTC, when the job ended
  // Who the writer said it was. Informative only: a reader trusts the file's owner.
  std::string user;
  std::string command;  // "train" (the built-in trainer) or "run" (a user's program)
  // What ran. model_key: 16 hex digits, the same for every run of the same model whatever
  // its batch (ModelKey of the features as calibration files write them; for `run`, of the
  // profile or the command). features: null when not known (a run without a plan).
  std::string model_key;
  std::string model_name;  // the spec's name or the program, for people
  nlohmann::json features;
  // The training spec as JSON (common/spec_json.hpp), null for a program: a reader computes
  // the features (and so the key) from it when the writer had no plan to take them from.
  nlohmann::json spec;
  // Where it ran. gpu_type: the plan's (the cluster description's name), "" unknown.
  std::string gpu_type;
  std::string device;        // "cpu", "cuda:0 (NVIDIA H100 ...)"
  nlohmann::json probe;      // the node's device probe (launcher/probe/), null: none
  int ranks = 1;             // processes of the job
  int threads_per_rank = 0;  // CPU threads each rank computed with (0: unknown)
  int ranks_per_node = 1;
  int gpus_per_node = 0;  // 0: a CPU job
  std::vector<std::string> hosts;
  int64_t global_batch = 0, per_rank_batch = 0;  // samples per step (per_rank: the largest)
  // Measured, seconds. step_s: the median step (checkpoints and evaluations left out);
  // startup_s: job start to the first step (< 0: unknown); eval/checkpoint: totals over
  // the counts; total_s: the whole job; energy_j: < 0 when not measured.
  double step_s = 0;
  int64_t steps = 0;
  // All steps together (the sum of each step's time, evaluations and checkpoints left out);
  // < 0: unknown (a record of an older writer). A job takes its mean step, not its median:
  // the slow steps' excess grows with the steps, and a reader that charged it to the
  // start-up would predict a longer job's start-up too long and its steps too short.
  double steps_s = -1;
  // The mean step where the record knows it, else the median.
  double mean_step_s() const { return steps_s > 0 && steps > 0 ? steps_s / double(steps) : step_s; }
  // The steps after the run's first epoch (its first steps_per_epoch steps), their count and
  // seconds (0 and < 0: unknown, or a run of one epoch or less). The first epoch's steps run
  // longer (the example spec: 43.2 ms a step against 41.2 ms over the seven after it), and
  // a fixed excess in a mean step grows with the steps of the job a record plans: that run's
  // first 2 epochs' mean (42.0 ms) predicts its 8 epochs' steps 2% long.
  int64_t later_steps = 0;
  double later_steps_s = -1;
  // A step of a run as long as one likes: the mean of the steps after the first epoch where
  // the record has at least 3, else the mean step.
  double steady_step_s() const {
    return later_steps >= 3 && later_steps_s > 0 ? later_steps_s / double(later_steps)
                                                 : mean_step_s();
  }
  // The gradient allreduce a step waited for, seconds (< 0: unknown, a record of an older
  // writer or a program's): the smallest over the ranks of each rank's mean seconds blocked
  // in it. A faster rank's wait includes its slower peers' compute; the fastest wait is the
  // collective itself (and, on shared cores, the peers the scheduler did not run). The
  // estimator subtracts it from the step to learn the compute, and learns the links from
  // it (estimator/observe/correction.hpp).
  double allreduce_s = -1;
  // The step's communication as far as the record knows it: measured where it was, else
  // what the plan predicted, else none.
  double step_comm_s() const {
    return allreduce_s >= 0 ? allreduce_s : has_prediction ? predicted_comm_s : 0;
  }
  double startup_s = -1;
  double eval_s = 0;
  int64_t evaluations = 0;
  // The first evaluation's seconds (< 0: unknown): it costs more than the others (the test
  // set's first pass: 1.39 s against 0.95-1.01 s for the seven after it, the example spec).
  double first_eval_s = -1;
  double checkpoint_s = 0;
  int64_t checkpoints = 0;
  double total_s = 0;
  bool whole_job = true;  // every step from the start (not resumed, not cut short)
  double energy_j = -1;
  // The plan's prediction (has_prediction false: the job had no plan). compute_s and comm_s
  // split the step; the estimator recomputes compute and keeps comm from here.
  bool has_prediction = false;
  double predicted_step_s = 0, predicted_compute_s = 0, predicted_comm_s = 0, predicted_total_s = 0;
};

// 16 lower-case hex digits: 64-bit FNV-1a of `canonical` (the dump of a features object,
// whose keys nlohmann keeps sorted, or a program's name). Stable across builds and hosts.
std::string ModelKey(const std::string& canonical);

// The record as JSON, with "dlh_observation": kObservationVersion.
nlohmann::json ObservationToJson(const Observation& o);

// Throws RecordError "<origin>: <field>: <problem>" for anything but a record this version
// writes: another or no format tag, a missing required field (created, model.key,
// where.device, where.ranks, batch.per_rank, measured.step_s, measured.total_s), a value of
// the wrong type or out of range, a part larger than its whole (later_steps above steps,
// first_eval_s above eval_s). Unknown keys are allowed (a later minor addition).
Observation ObservationFromJson(const nlohmann::json& j, const std::string& origin);

// "2026-11-28T09:30:00Z", now.
std::string RecordTimeNow();

}  // namespace dlh
