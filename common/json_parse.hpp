// DLH — strict JSON parsing for every input file (spec, cluster description, calibration).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dlh {

struct JsonProblem {
  std::string path;     // object holding a duplicate key ("layers[3]"), empty for the file
  std::string message;  // "not valid JSON: parse error at line 1, column 5: ..." or
                        // "duplicate key \"kernel\""
};

// Parses `text` with nlohmann-json. Also rejects duplicate keys, which nlohmann would
// resolve silently by keeping the last. Returns false and fills `problem` (one ASCII line)
// on failure.
bool ParseJsonStrict(const std::string& text, nlohmann::json* out, JsonProblem* problem);

}  // namespace dlh
