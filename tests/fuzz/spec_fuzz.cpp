// DLH fuzz target — the training spec (dlh::ParseSpec), and what the tools compute next
// from a spec it accepts: layer shapes, features (the SPANK plugin and dlh-estimate) and
// the learning-rate schedule. Refusals are SpecError (estimator code: EstimateError).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/model/features.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dlh::fuzz::RefusesOnlyWith<dlh::SpecError>("ParseSpec", [&] {
    const dlh::TrainSpec spec = dlh::ParseSpec(text, "spec.json", "/fuzz");
    dlh::LayerShapes(spec);
    const dlh::ModelFeatures f = dlh::ComputeFeatures(spec);
    dlh::TrainingMemoryBytes(f, spec.batch_size, 2, dlh::MemoryEngine::kDevice);
    dlh::TrainingMemoryBytes(f, spec.batch_size, 2, dlh::MemoryEngine::kCpu);
    for (int64_t steps_per_epoch : {int64_t{1}, int64_t{937}})
      for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{100}, int64_t{1} << 40})
        dlh::LearningRate(spec, step, steps_per_epoch);
  });
  return 0;
}
