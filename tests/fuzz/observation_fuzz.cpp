// DLH fuzz target — an observation record (dlh::ObservationFromJson), the file every job
// leaves in a store that other users read: the input parsed as strict JSON, read as a record,
// and a record read back from its own JSON must come out the same. Refusals are RecordError.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/json_parse.hpp"
#include "launcher/observe/record.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > dlh::kMaxObservationBytes) return 0;  // the reader never opens a larger file
  nlohmann::json j;
  dlh::JsonProblem problem;
  if (!dlh::ParseJsonStrict(std::string(reinterpret_cast<const char*>(data), size), &j, &problem))
    return 0;
  dlh::fuzz::RefusesOnlyWith<dlh::RecordError>("ObservationFromJson", [&] {
    const dlh::Observation o = dlh::ObservationFromJson(j, "record.json");
    const nlohmann::json once = dlh::ObservationToJson(o);
    if (dlh::ObservationToJson(dlh::ObservationFromJson(once, "again.json")) != once) std::abort();
  });
  return 0;
}
