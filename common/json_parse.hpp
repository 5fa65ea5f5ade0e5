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

// Arrays and objects nested deeper than this are refused while parsing. Real inputs nest
// 3 or 4 levels; 100,000 levels of "[" (200 KB) used to crash every tool through the
// recursive printing and destruction of such a value.
constexpr size_t kMaxJsonDepth = 64;

// Parses `text` with nlohmann-json. Also rejects duplicate keys, which nlohmann would
// resolve silently by keeping the last, and nesting deeper than kMaxJsonDepth. Returns false
// and fills `problem` (one ASCII line) on failure.
bool ParseJsonStrict(const std::string& text, nlohmann::json* out, JsonProblem* problem);

// A value as an error message shows it, on one ASCII line of at most 60 characters:
// scalars as JSON ("3", "\"relu\"", "null"), arrays and objects by their kind and size only
// ("an array of 2 items", "an empty object"), so that a message never echoes a large or
// deep structure of the user's.
std::string ShownJsonValue(const nlohmann::json& value);

}  // namespace dlh
