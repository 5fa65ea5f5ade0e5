// DLH estimator — the layers of a GPU calibration's samples (see gpu_model_layers.hpp).
#include "estimator/calibrate/gpu_model_layers.hpp"

#include "common/error.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/features.hpp"

namespace dlh {

const std::map<std::string, TrainSpec>& KnownGpuModels() {
  static const std::map<std::string, TrainSpec> known = [] {
    std::map<std::string, TrainSpec> m;
    for (const auto& list :
         {GpuCalibrationSweep(false), GpuCalibrationSweep(true), GpuValidationModels()})
      for (const SweepEntry& e : list) m.emplace(e.spec.name, e.spec);
    return m;
  }();
  return known;
}

bool ObservedRow(const std::string& model) { return model.rfind("observed ", 0) == 0; }

std::vector<TimingSample> GpuSamplesWithLayers(std::vector<TimingSample> samples,
                                               const std::string& path, int* observed) {
  const std::map<std::string, TrainSpec>& known = KnownGpuModels();
  std::vector<TimingSample> out;
  for (TimingSample& s : samples) {
    if (observed != nullptr && ObservedRow(s.model)) {
      ++*observed;
      continue;
    }
    auto it = known.find(s.model);
    if (it == known.end())
      throw UsageError(path + ": '" + s.model +
                       "' is no GPU sweep or validation model: its layers cannot be rebuilt");
    s.features = ComputeFeatures(it->second);
    out.push_back(std::move(s));
  }
  if (out.empty()) throw UsageError(path + ": no samples");
  return out;
}

}  // namespace dlh
