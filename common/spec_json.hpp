// DLH — a TrainSpec written back as spec JSON (docs/reference/training-spec.md), for specs
// built in code: the calibration sweep travels to `dlh-launch time-steps` as spec text, which the
// launcher reads with the ordinary ParseSpec and its checks.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/spec.hpp"

namespace dlh {

// Every field that ParseSpec reads, explicitly (also the defaults; label_smoothing only when
// set), so that
// ParseSpec(SpecToJson(s).dump(), ...) gives back `s` (but origin and json). `dataset` is
// written as given, or as `dataset_if_empty` when the spec has none (ParseSpec requires one;
// step timing reads no data).
nlohmann::ordered_json SpecToJson(const TrainSpec& spec, const std::string& dataset_if_empty);

}  // namespace dlh
