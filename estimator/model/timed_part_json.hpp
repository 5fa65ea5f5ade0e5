// DLH estimator — the JSON of a calibration's part timed apart from its whole steps: a count
// of what was timed and seconds per unit by name, as "optimizer_update" and
// "activation_cost" hold them ({"params": 1049610, "seconds_per_param": {"sgd": 5e-11, ...}}).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlh {

struct TimedPart {
  int64_t count = 0;
  std::map<std::string, double> seconds;  // by name, each positive
};

// {count_key: positive integer, seconds_key: {name: positive number for every name}}; throws
// EstimateError naming `at` ("cal.json: optimizer_update") and the field, for any other key.
TimedPart ReadTimedPart(const nlohmann::json& j, const std::string& at, const char* count_key,
                        const char* seconds_key, const std::vector<std::string>& names);

}  // namespace dlh
