// DLH fuzz target — DLH_PLAN (dlh::ParsePlan), the plan JSON dlh-launch reads from its
// environment, then applied to a spec (dlh::ApplyPlan). Refusals are UsageError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "launcher/train/plan.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dlh::fuzz::RefusesOnlyWith<dlh::UsageError>("ParsePlan", [&] {
    const dlh::LaunchPlan plan = dlh::ParsePlan(text, "DLH_PLAN");
    dlh::TrainSpec spec;
    spec.epochs = 8;
    spec.batch_size = 64;
    dlh::ApplyPlan(plan, &spec);
  });
  return 0;
}
