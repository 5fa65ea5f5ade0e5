// DLH fuzz target — what the SPANK plugin parses inside sbatch: the --dlh-auto values
// (dlh::plan::ParseAutoValue, ApplyAutoValue) and the plugstack.conf arguments
// (ParsePluginArgs). The input is split on '\n' into pieces: they are the plugstack.conf
// arguments, and also successive --dlh-auto values (as #SBATCH lines and the command line
// give them); the whole input is one more --dlh-auto value. Refusals are UsageError.
// Also checked, as options.hpp promises: a refused value leaves the options unchanged, and
// applying the same value twice changes nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/plan/options.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

using dlh::plan::AutoOptions;

bool Same(const AutoOptions& a, const AutoOptions& b) {
  return a.requested == b.requested && a.deadline == b.deadline && a.deadline_s == b.deadline_s &&
         a.spec == b.spec && a.samples == b.samples && a.epochs == b.epochs &&
         a.objective == b.objective && a.max_gpus == b.max_gpus && a.types == b.types &&
         a.mixed == b.mixed && a.per_gpu_batch == b.per_gpu_batch && a.dry_run == b.dry_run;
}

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "plugin options: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> pieces;
  for (size_t start = 0;;) {
    const size_t nl = text.find('\n', start);
    pieces.push_back(text.substr(start, nl == std::string::npos ? nl : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }

  dlh::fuzz::RefusesOnlyWith<dlh::UsageError>("ParseAutoValue",
                                              [&] { dlh::plan::ParseAutoValue(text.c_str()); });
  dlh::fuzz::RefusesOnlyWith<dlh::UsageError>("ParsePluginArgs",
                                              [&] { dlh::plan::ParsePluginArgs(pieces); });

  AutoOptions merged;
  for (const std::string& piece : pieces) {
    const AutoOptions before = merged;
    bool refused = false;
    dlh::fuzz::RefusesOnlyWith<dlh::UsageError>("ApplyAutoValue", [&] {
      refused = true;
      dlh::plan::ApplyAutoValue(merged, piece.c_str());
      refused = false;
    });
    if (refused) {
      Check(Same(before, merged), "a refused --dlh-auto value changed the options");
      continue;
    }
    const AutoOptions once = merged;
    dlh::plan::ApplyAutoValue(merged, piece.c_str());
    Check(Same(once, merged), "applying the same --dlh-auto value twice changed the options");
  }
  return 0;
}
