// DLH estimator — a calibration refitted with observed jobs (see refit.hpp).
#include "estimator/calibrate/refit.hpp"

#include <optional>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/calibrate/gpu_model_layers.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/optimizer_cost.hpp"

namespace dlh {
namespace {

// A record's spec and its features as this build reads them; neither for a record without a
// spec (a program's) or with one this build cannot read (taken as it is).
struct RecordModel {
  std::optional<TrainSpec> spec;
  std::optional<ModelFeatures> features;
};
RecordModel ReadRecordModel(const Observation& r) {
  RecordModel m;
  if (!r.spec.is_object()) return m;
  try {
    TrainSpec spec = ParseSpec(r.spec.dump(), "observation", "");
    m.features = ComputeFeatures(spec);
    m.spec = std::move(spec);
  } catch (const std::exception&) {
    return RecordModel{};
  }
  return m;
}

// The seconds of the record's step that a calibration's row holds: its median step less its
// allreduce (measured, else what its plan predicted: Observation::step_comm_s) and, where its spec
// says which optimizer it ran, that optimizer's update beyond the sweep's (SGD with momentum:
// optimizer_cost.hpp), and its GELUs and SiLUs beyond the model's price of them
// (activation_cost.hpp): the rows teach the step-time model what it prices, not those.
double RowSeconds(const Calibration& cal, const Observation& r, const RecordModel& m) {
  double s = r.step_s - r.step_comm_s();
  if (m.spec && !cal.optimizer_update.empty()) {
    try {
      s -= OptimizerExtraSeconds(cal.optimizer_update, m.spec->optimizer, m.features->params);
    } catch (const std::exception&) {  // an optimizer this build cannot price: taken as it is
    }
  }
  if (m.features) s -= CalibratedActivationSeconds(cal, *m.features, r.per_rank_batch);
  return s;
}

// The layer model fitted again to the sweep's rows and `observed` (with their layers).
void RefitLayers(const Calibration& cal, const std::vector<TimingSample>& observed,
                 int observed_without, const RefitOptions& o, const std::string& origin,
                 Calibration* out, LayerRefit* r) {
  const StoredGpuLayerModel& stored = cal.gpu_layer_model;
  r->observed_rows = int(observed.size());
  r->observed_without = observed_without;
  if (observed.empty()) {
    r->why_not = "no observed row has layers (a record's spec gives them)";
    return;
  }
  int earlier = 0;  // rows an earlier refit added: their layers are not in the file
  std::vector<TimingSample> rows;
  try {
    rows = GpuSamplesWithLayers(cal.samples, origin, &earlier);
  } catch (const UsageError& e) {  // a sweep of another version: the linear refit still stands
    r->why_not = e.what();
    return;
  }
  r->sweep_rows = int(rows.size());
  rows.insert(rows.end(), observed.begin(), observed.end());
  r->fit = FitGpuLayerModel(rows, stored.peaks, o.folds);
  r->old_cv_mape = stored.cv_mape;
  r->old_observed_mape = GpuStepMape(observed, stored.peaks, stored.params);
  r->new_observed_mape = GpuStepMape(observed, stored.peaks, r->fit.params);
  StoredGpuLayerModel refit = stored;
  refit.params = r->fit.params;
  refit.samples = r->fit.samples;
  refit.mape = r->fit.mape;
  refit.cv_mape = r->fit.cv_mape;
  // The validation figure stays: it is the last error measured on models outside the fit,
  // and plans' bands take the larger of it and the cross-validated one.
  refit.fitted_to =
      "the calibration's sweep (" + std::to_string(r->sweep_rows) + " rows) and " +
      std::to_string(r->observed_rows) + " observed jobs" +
      (stored.fitted_to == "the calibration's sweep" ? std::string()
                                                     : " (before: " + stored.fitted_to + ")");
  out->gpu_layer_model = refit;
  r->done = true;
}

}  // namespace

std::string RecordGpuName(const std::string& device) {
  if (device.rfind("cuda", 0) != 0) return "";
  const size_t open = device.find('(');
  if (open == std::string::npos) return "";
  const size_t end = device.find_first_of(",)", open + 1);
  return device.substr(open + 1, end == std::string::npos ? std::string::npos : end - open - 1);
}

bool RecordFitsCalibration(const Observation& r, const Calibration& cal, const RefitOptions& o) {
  if (o.all) return true;
  if (!o.gpu.empty() && r.gpu_type != o.gpu) return false;
  if (cal.device == "cpu")
    return r.device == "cpu" && r.ranks_per_node == 1 &&
           r.threads_per_rank == CalibrationThreads(cal);
  // A GPU calibration: the records of its GPU. Without the GPU's name in the file only the
  // type the caller names says which records are its.
  const std::string name = cal.device_info.is_object() && cal.device_info.contains("name") &&
                                   cal.device_info["name"].is_string()
                               ? cal.device_info["name"].get<std::string>()
                               : std::string();
  if (name.empty()) return !o.gpu.empty() && r.device.rfind("cuda", 0) == 0;
  return RecordGpuName(r.device) == name;
}

Calibration RefitCalibration(const Calibration& cal, const std::vector<Observation>& records,
                             const RefitOptions& o, const std::string& origin,
                             RefitReport* report) {
  // The rows go in through the calibration reader, which checks every feature as it checks
  // the calibration's own.
  nlohmann::json j = CalibrationToJson(cal);
  std::vector<TimingSample> with_layers;  // for the GPU layer model
  int without_layers = 0;
  const bool layers = cal.gpu_layer_model.present;
  for (const Observation& r : records) {
    // The spec read once: the optimizer's update and, for the layer model, the layers.
    RecordModel model = ReadRecordModel(r);
    const double seconds = RowSeconds(cal, r, model);
    if (!r.features.is_object() || !RecordFitsCalibration(r, cal, o) || !(seconds > 0)) {
      ++report->skipped;
      continue;
    }
    // A record whose features miss a field (a writer of another build, a hand-made file)
    // is skipped and named here, not found by the calibration reader below as a damaged
    // sample of the calibration that refit then refuses whole.
    try {
      FeaturesFromJson(r.features, "the observation of " + r.model_name + " made " + r.created,
                       "model.features");
    } catch (const EstimateError& e) {
      report->problems.push_back(e.what());
      ++report->skipped;
      continue;
    }
    j["samples"].push_back({{"model", "observed " + r.model_name},
                            {"batch", r.per_rank_batch},
                            {"seconds", seconds},
                            {"joules", nullptr},
                            {"features", r.features}});
    ++report->added;
    if (!layers) continue;
    if (!model.features) {  // no spec, or one this build cannot read
      ++without_layers;
      continue;
    }
    TimingSample s;
    s.model = "observed " + r.model_name;
    s.features = std::move(*model.features);
    s.batch = r.per_rank_batch;
    s.seconds = seconds;
    with_layers.push_back(std::move(s));
  }
  Calibration refit = CalibrationFromJson(j, origin);
  refit.model = FitTimeModel(cal.device, refit.samples, o.folds);
  if (layers) RefitLayers(cal, with_layers, without_layers, o, origin, &refit, &report->layers);
  return refit;
}

}  // namespace dlh
