// DLH estimator — a calibration's part timed apart, read (timed_part_json.hpp).
#include "estimator/model/timed_part_json.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "common/json_parse.hpp"

namespace dlh {

TimedPart ReadTimedPart(const nlohmann::json& j, const std::string& at, const char* count_key,
                        const char* seconds_key, const std::vector<std::string>& names) {
  auto fail = [&](const std::string& field, const std::string& want, const nlohmann::json& got) {
    throw EstimateError(at + field + ": " + want + ", got " + ShownJsonValue(got));
  };
  auto only = [&](const nlohmann::json& o, const std::string& where,
                  const std::vector<std::string>& keys) {
    for (const auto& [key, value] : o.items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        throw EstimateError(at + where + ": unknown key \"" + key + "\"");
  };
  if (!j.is_object()) fail("", "must be a JSON object", j);
  only(j, "", {count_key, seconds_key});
  TimedPart part;
  const std::string count_at = std::string(".") + count_key;
  if (!j.contains(count_key)) throw EstimateError(at + count_at + ": required");
  const nlohmann::json& count = j[count_key];
  if (!count.is_number_integer() || count.get<int64_t>() <= 0)
    fail(count_at, "must be a positive integer", count);
  part.count = count.get<int64_t>();
  const std::string seconds_at = std::string(".") + seconds_key;
  if (!j.contains(seconds_key)) throw EstimateError(at + seconds_at + ": required");
  const nlohmann::json& per = j[seconds_key];
  if (!per.is_object()) fail(seconds_at, "must be a JSON object", per);
  only(per, seconds_at, names);
  for (const std::string& name : names) {
    const std::string field = seconds_at + "." + name;
    if (!per.contains(name)) throw EstimateError(at + field + ": required");
    const nlohmann::json& v = per[name];
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail(field, "must be a positive number", v);
    part.seconds[name] = v.get<double>();
  }
  return part;
}

}  // namespace dlh
