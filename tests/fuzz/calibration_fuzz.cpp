// DLH fuzz target — the calibration file: strict JSON (dlh::ParseJsonStrict), then
// dlh::CalibrationFromJson, then what dlh-estimate does with one it accepts: predict step
// times, write it back, and refit its samples (`dlh-estimate refit`). Refusals are
// EstimateError.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "common/json_parse.hpp"
#include "estimator/model/time_model.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  dlh::JsonProblem problem;
  if (!dlh::ParseJsonStrict(text, &j, &problem)) return 0;
  dlh::fuzz::RefusesOnlyWith<dlh::EstimateError>("CalibrationFromJson", [&] {
    const dlh::Calibration c = dlh::CalibrationFromJson(j, "calibration.json");
    for (const dlh::TimingSample& s : c.samples) c.model.seconds(s.features, s.batch);
    dlh::CalibrationToJson(c).dump(2);
    if (c.samples.size() >= size_t(2 * dlh::kTimeTerms)) dlh::FitTimeModel(c.device, c.samples, 5);
  });
  return 0;
}
