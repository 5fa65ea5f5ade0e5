// DLH estimator — a job's optimizer beyond the sweep's (optimizer_cost.hpp).
#include "estimator/model/optimizer_cost.hpp"

#include "estimator/model/timed_part_json.hpp"

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
  const TimedPart part = ReadTimedPart(j, origin + ": optimizer_update", "params",
                                       "seconds_per_param", {"sgd", "momentum", "adam"});
  OptimizerUpdateCost c;
  c.params = part.count;
  c.sgd_s = part.seconds.at("sgd");
  c.momentum_s = part.seconds.at("momentum");
  c.adam_s = part.seconds.at("adam");
  return c;
}

}  // namespace dlh
