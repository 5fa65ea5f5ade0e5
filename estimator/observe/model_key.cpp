// DLH estimator — a model's key for the observation store (see model_key.hpp).
#include "estimator/observe/model_key.hpp"

#include "estimator/model/time_model.hpp"
#include "launcher/observe/record.hpp"

namespace dlh {

nlohmann::json FeaturesRecordJson(const ModelFeatures& f) {
  // Through the calibration writer itself, so that the two can never disagree on a field.
  Calibration c;
  c.model.coef.assign(size_t(kTimeTerms), 0.0);
  TimingSample s;
  s.features = f;
  s.batch = 1;
  s.seconds = 1;
  c.samples = {s};
  return CalibrationToJson(c).at("samples").at(0).at("features");
}

std::string FeaturesJsonModelKey(nlohmann::json features) {
  for (const FeatureField& derived : kCpuSkippedFeatures) features.erase(derived.name);
  // Derived from the spec's shapes like the rest, and absent from records made before it:
  // left out, so that a model keeps its key across that change.
  features.erase("conv_weight_elements");
  return ModelKey(features.dump());
}

std::string FeaturesModelKey(const ModelFeatures& f) {
  return FeaturesJsonModelKey(FeaturesRecordJson(f));
}

std::string AdamModelKey(const std::string& features_key) {
  return ModelKey(features_key + " adam");
}

bool SpecJsonTrainsWithAdam(const nlohmann::json& spec) {
  if (!spec.is_object() || !spec.contains("optimizer")) return false;
  const nlohmann::json& o = spec["optimizer"];
  return o.is_object() && o.contains("type") && o["type"] == "adam";
}

std::string JobModelKey(const Job& job) {
  if (job.profile) return ModelKey("program " + job.profile->program);
  const std::string key = FeaturesModelKey(job.features);
  return job.spec.optimizer.kind == OptimizerSpec::Kind::Adam ? AdamModelKey(key) : key;
}

}  // namespace dlh
