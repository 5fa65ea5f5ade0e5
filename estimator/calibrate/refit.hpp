// DLH estimator — a calibration refitted with the jobs the observation store has seen
// (`dlh-estimate refit`, issue 40: "every job teaches the estimator").
//
// Which records count: those with features (a record of a user's program has none) of the
// calibration's device, and with `gpu` of that GPU type (the cluster's name), or with `all`
// any. A CPU calibration's device is "cpu", and its records are those of one rank per node with
// the calibration's threads (ranks sharing cores run slower than the calibration measures). A
// GPU calibration's device is "cuda"; its records are those whose device ("cuda:N (NAME,
// ...)") names the calibration's GPU (device_info.name), whatever their ranks: each rank has a
// GPU of its own. Each is one row: its features, its per-rank batch and its median step less
// the allreduce its plan predicted and the optimizer's update beyond the sweep's.
//
// The linear model is fitted again to the sweep's rows and the observed ones. Where the
// calibration holds a GPU layer model (gpu_layer_model.hpp), which is what plans the type, it
// is fitted again too: to the sweep's rows (their layers rebuilt by name) and the observed
// rows whose records carry a spec (their layers computed from it), on the peaks it was fitted
// on. Otherwise a refit would leave a GPU type's plans as they were.
#pragma once

#include <string>
#include <vector>

#include "estimator/model/gpu_layer_model.hpp"
#include "estimator/model/time_model.hpp"
#include "launcher/observe/record.hpp"

namespace dlh {

struct RefitOptions {
  bool all = false;  // every record with features, whatever its device, ranks and threads
  std::string gpu;   // only records of this GPU type ("" any)
  int folds = 5;
};

// Whether `r` is a job on `cal`'s device (and type, threads) as the header says.
bool RecordFitsCalibration(const Observation& r, const Calibration& cal, const RefitOptions& o);

// The GPU named by a record's device: "NVIDIA H100 80GB HBM3" of "cuda:0 (NVIDIA H100 80GB
// HBM3, sm_90, 79 GiB)" or of a program's "cuda:0 (NVIDIA H100 80GB HBM3)"; "" when the device
// is no GPU or names none.
std::string RecordGpuName(const std::string& device);

struct LayerRefit {
  bool done = false;
  std::string why_not;       // when not done and the calibration has a layer model
  int sweep_rows = 0;        // the sweep's rows, layers rebuilt by name
  int observed_rows = 0;     // the observed rows with layers (their records' specs)
  int observed_without = 0;  // observed rows whose records had no spec the build reads
  GpuLayerFit fit;           // the new fit (sweep and observed rows)
  double old_cv_mape = 0;    // the stored model's cross-validated MAPE (its own rows)
  // Over the observed rows: the stored model's MAPE, and the new fit's.
  double old_observed_mape = 0, new_observed_mape = 0;
};

struct RefitReport {
  int added = 0, skipped = 0;
  std::vector<std::string> problems;  // the records skipped as unreadable, one line each
  LayerRefit layers;
};

// `cal` with the records that fit it as extra rows, its linear model (and GPU layer model)
// fitted again. `origin` names the result in errors ("cal.json with STORE"). Throws
// EstimateError / CalibrationError as the fits and the calibration reader do.
Calibration RefitCalibration(const Calibration& cal, const std::vector<Observation>& records,
                             const RefitOptions& o, const std::string& origin, RefitReport* report);

}  // namespace dlh
