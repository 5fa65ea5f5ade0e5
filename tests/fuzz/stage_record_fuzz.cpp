// DLH fuzz target — the record dlh-data stage keeps beside a staged copy
// (DIR/.NAME.stage.json; dlh::ParseStageRecord). Node-local folders are shared, and a record
// is read before it is trusted: whatever its bytes, parsing must neither throw nor crash,
// and a record it accepts must hold what it promises (a path, sizes >= 0, a 32-bit sum).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "launcher/data/stage.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    dlh::StageRecord r;
    if (dlh::ParseStageRecord(text, &r) && (r.size < 0 || r.mtime_ns < 0)) {
      std::fprintf(stderr, "ParseStageRecord accepted a negative size or time\n");
      std::abort();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ParseStageRecord threw: %s\n", e.what());
    std::abort();
  }
  return 0;
}
