// DLH estimator — what a job's optimizer costs a step beyond the calibration sweep's (issue 40).
//
// Every sweep model trains with SGD and momentum, so the step-time model's parameter term
// (update_s_per_param, time_model.hpp) prices that optimizer's update, and nothing else. A
// job with Adam reads and writes two moments per weight and takes a square root and a
// division for each; plain SGD reads no momentum at all. Measured on the project's 2-core
// host (dlh-estimate profile, the whole-jobs bench's strided CNN, 422k parameters, 2 threads):
// the update took 0.054 ms with plain SGD, 0.09 ms with momentum and 0.44 ms with Adam, 5.8%
// of that step, which the step-time model left out. So a CPU calibration times the engine's
// own update of each kind on one parameter array (calibrate, MeasureOptimizerUpdate), and a
// job's step gains params x (its kind's seconds per parameter - momentum's).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/spec.hpp"

namespace dlh {

struct OptimizerUpdateCost {
  int64_t params = 0;  // the parameter count timed; 0: not measured (older files, GPUs)
  // Seconds per parameter of one update, at the calibration's threads.
  double sgd_s = 0;       // plain SGD
  double momentum_s = 0;  // SGD with momentum: the sweep's
  double adam_s = 0;
  bool empty() const { return params <= 0; }
};

// "sgd", "momentum" or "adam": the kind an optimizer spec's update costs as.
const char* OptimizerUpdateKind(const OptimizerSpec& o);

// Seconds per step that `o`'s update adds over the sweep's (momentum) for `params` weights, at
// the calibration's speed divided by `bandwidth_ratio` (an update is a pass over memory; wave
// scaling moves it so); negative for plain SGD, 0 without a measurement.
double OptimizerExtraSeconds(const OptimizerUpdateCost& cost, const OptimizerSpec& o, double params,
                             double bandwidth_ratio = 1);

// Seconds per step of stale-synchronous training's own steps (SyncSpec::own_gradient_first,
// launcher/train/trainer_stale.cpp) for `params` weights: each step a rank applies `staleness`
// updates of `o`'s kind on a copy of the agreed model and copies that model and its `slots`
// optimizer state arrays out and back in. Priced from the same measurement: the copy out and
// back of 1 + slots arrays as 3 (1 + slots) momentum updates. Measured (2026-12-01, the example
// spec, staleness 2, 2 ranks of 1 thread, traced beside the same run with the sums alone): the
// exchange took about 2.2 ms more a step, of which the S updates are 0.55 ms; a bare copy would
// be 0.8 per array (four passes where an update makes five), but the engine's copies go array
// by array, by name, with the batch-norm buffers. 0 without a measurement or staleness.
double OwnStepsSeconds(const OptimizerUpdateCost& cost, const OptimizerSpec& o, int staleness,
                       int slots, double params, double bandwidth_ratio = 1);

// The calibration file's "optimizer_update" object and back. FromJson throws EstimateError
// naming `origin` and the field (one line) for a damaged one.
nlohmann::json OptimizerUpdateCostToJson(const OptimizerUpdateCost& cost);
OptimizerUpdateCost OptimizerUpdateCostFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace dlh
