// DLH estimator — a job's optimizer beyond the sweep's (optimizer_cost.hpp).
#include "estimator/model/optimizer_cost.hpp"

#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "common/json_parse.hpp"

namespace dlh {

const char* OptimizerUpdateKind(const OptimizerSpec& o) {
  if (o.kind == OptimizerSpec::Kind::Adam) return "adam";
  return o.momentum > 0 ? "momentum" : "sgd";
}

namespace {

// Seconds per parameter of one update of `o`'s kind.
double UpdateSecondsPerParam(const OptimizerUpdateCost& cost, const OptimizerSpec& o) {
  const std::string kind = OptimizerUpdateKind(o);
  return kind == "adam" ? cost.adam_s : kind == "sgd" ? cost.sgd_s : cost.momentum_s;
}

}  // namespace

double OptimizerExtraSeconds(const OptimizerUpdateCost& cost, const OptimizerSpec& o, double params,
                             double bandwidth_ratio) {
  if (cost.empty() || !(params > 0) || !(bandwidth_ratio > 0)) return 0;
  return params * (UpdateSecondsPerParam(cost, o) - cost.momentum_s) / bandwidth_ratio;
}

double OwnStepsSeconds(const OptimizerUpdateCost& cost, const OptimizerSpec& o, int staleness,
                       int slots, double params, double bandwidth_ratio) {
  if (cost.empty() || staleness <= 0 || !(params > 0) || !(bandwidth_ratio > 0)) return 0;
  const double per = UpdateSecondsPerParam(cost, o);
  constexpr double kCopyPerArray = 3.0;  // momentum updates a copy out and back costs (measured)
  return params * (staleness * per + kCopyPerArray * (1 + slots) * cost.momentum_s) /
         bandwidth_ratio;
}

nlohmann::json OptimizerUpdateCostToJson(const OptimizerUpdateCost& cost) {
  return {{"params", cost.params},
          {"seconds_per_param",
           {{"sgd", cost.sgd_s}, {"momentum", cost.momentum_s}, {"adam", cost.adam_s}}}};
}

OptimizerUpdateCost OptimizerUpdateCostFromJson(const nlohmann::json& j,
                                                const std::string& origin) {
  const std::string at = origin + ": optimizer_update";
  auto fail = [&](const std::string& field, const std::string& want, const nlohmann::json& got) {
    throw EstimateError(at + field + ": " + want + ", got " + ShownJsonValue(got));
  };
  if (!j.is_object()) fail("", "must be a JSON object", j);
  for (const auto& [key, value] : j.items())
    if (key != "params" && key != "seconds_per_param")
      throw EstimateError(at + ": unknown key \"" + key + "\"");
  OptimizerUpdateCost c;
  if (!j.contains("params")) throw EstimateError(at + ".params: required");
  const nlohmann::json& params = j["params"];
  if (!params.is_number_integer() || params.get<int64_t>() <= 0)
    fail(".params", "must be a positive integer", params);
  c.params = params.get<int64_t>();
  if (!j.contains("seconds_per_param")) throw EstimateError(at + ".seconds_per_param: required");
  const nlohmann::json& per = j["seconds_per_param"];
  if (!per.is_object()) fail(".seconds_per_param", "must be a JSON object", per);
  for (const auto& [key, value] : per.items())
    if (key != "sgd" && key != "momentum" && key != "adam")
      throw EstimateError(at + ".seconds_per_param: unknown key \"" + key + "\"");
  for (auto [key, field] : {std::pair{"sgd", &OptimizerUpdateCost::sgd_s},
                            std::pair{"momentum", &OptimizerUpdateCost::momentum_s},
                            std::pair{"adam", &OptimizerUpdateCost::adam_s}}) {
    const std::string name = std::string(".seconds_per_param.") + key;
    if (!per.contains(key)) throw EstimateError(at + name + ": required");
    const nlohmann::json& v = per[key];
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>()))
      fail(name, "must be a positive number", v);
    c.*field = v.get<double>();
  }
  return c;
}

}  // namespace dlh
