// DLH estimator — which model a job is, for the observation store: its per-sample features
// as calibration files write them, and their key (launcher/observe/record.hpp, ModelKey).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "estimator/model/features.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

// `f` as a calibration file's samples[].features (estimator/model/time_model.cpp writes it).
nlohmann::json FeaturesRecordJson(const ModelFeatures& f);

// The key of a spec's features: ModelKey of FeaturesRecordJson(f).dump(), less the fields
// derived for one engine from the same layers (cpu_skipped_*), so that records written
// before those fields existed keep their model's key. The batch is not in it, so every run
// of the same model has the same key whatever its batch.
std::string FeaturesModelKey(const ModelFeatures& f);
// The same key of features as a record holds them (FeaturesRecordJson's fields).
std::string FeaturesJsonModelKey(nlohmann::json features);

// The key of a model trained with Adam: its features' key, marked. Adam's update costs about
// 9x momentum's (estimator/model/optimizer_cost.hpp), so an Adam run is no history for a
// momentum run of the same layers, nor the reverse; SGD with or without momentum keeps the
// features' key (their updates differ by little, and records written before 2026-12-01 keep
// theirs).
std::string AdamModelKey(const std::string& features_key);

// Whether a record's spec (JSON, as records hold it) trains with Adam; false for none.
bool SpecJsonTrainsWithAdam(const nlohmann::json& spec);

// The job's model key: its features' for a spec (AdamModelKey's for Adam), "program NAME"'s
// for a profiled program (dlh-launch run writes the same key for that program without a plan).
std::string JobModelKey(const Job& job);

}  // namespace dlh
