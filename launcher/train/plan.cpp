// DLH — reading DLH_PLAN (see plan.hpp).
#include "launcher/train/plan.hpp"

#include <climits>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_parse.hpp"

namespace dlh {

LaunchPlan ParsePlan(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem))
    throw UsageError(origin + ": " + (problem.path.empty() ? "" : problem.path + ": ") +
                     problem.message);
  auto fail = [&](const std::string& field, const std::string& why) -> UsageError {
    return UsageError(origin + ": " + field + ": " + why);
  };
  if (!j.is_object()) throw fail("plan", "must be a JSON object");
  if (!j.contains("format_version") || j["format_version"] != 1)
    throw fail("format_version", "must be 1");
  LaunchPlan p;
  p.present = true;
  const auto& gb = j.value("global_batch", nlohmann::json());
  if (!gb.is_number_integer() || gb.get<int64_t>() <= 0)
    throw fail("global_batch", "must be a positive integer, got " + gb.dump());
  p.global_batch = gb.get<int64_t>();
  const auto& lr = j.value("lr", nlohmann::json());
  if (!lr.is_number() || !(lr.get<double>() > 0))
    throw fail("lr", "must be a positive number, got " + lr.dump());
  p.lr = lr.get<double>();
  const auto& wu = j.value("warmup_epochs", nlohmann::json(0.0));
  if (!wu.is_number() || wu.get<double>() < 0)
    throw fail("warmup_epochs", "must be a non-negative number, got " + wu.dump());
  p.warmup_epochs = wu.get<double>();
  // Checked like the fields above: value("gpus", 0) converted 3.1e+301 to int (undefined
  // behaviour) and value() throws nlohmann's type_error, not a UsageError, for a value of
  // another type (tests/fuzz/plan_fuzz).
  if (j.contains("allocation") && j["allocation"].is_object()) {
    const auto& gpus = j["allocation"].value("gpus", nlohmann::json(0));
    if (!gpus.is_number_integer() || gpus.get<int64_t>() < 0 || gpus.get<int64_t>() > INT_MAX)
      throw fail("allocation.gpus", "must be a non-negative integer, got " + gpus.dump());
    p.gpus = int(gpus.get<int64_t>());
  }
  const auto& why = j.value("why", nlohmann::json(""));
  if (!why.is_string()) throw fail("why", "must be a string, got " + why.dump());
  p.summary = why.get<std::string>();
  // Optional, checked when present: non-negative finite numbers.
  auto seconds = [&](const nlohmann::json& parent, const char* key, const std::string& field) {
    if (!parent.contains(key)) return 0.0;
    const auto& v = parent[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      throw fail(field, "must be a non-negative number, got " + v.dump());
    return v.get<double>();
  };
  if (j.contains("predicted") && j["predicted"].is_object()) {
    const auto& pr = j["predicted"];
    p.predicted_total_s = seconds(pr, "total_s", "predicted.total_s");
    p.predicted_step_s = seconds(pr, "step_s", "predicted.step_s");
    const double steps = seconds(pr, "steps", "predicted.steps");
    if (steps > double(INT64_MAX / 2)) throw fail("predicted.steps", "too large");
    p.predicted_steps = int64_t(steps);
    if (pr.contains("phases") && pr["phases"].is_object()) {
      const auto& ph = pr["phases"];
      // The launcher measures start-up as everything before its first step.
      p.predicted_startup_s = seconds(ph, "startup_s", "predicted.phases.startup_s") +
                              seconds(ph, "data_s", "predicted.phases.data_s");
      p.predicted_steps_s = seconds(ph, "steps_s", "predicted.phases.steps_s") +
                            seconds(ph, "warmup_s", "predicted.phases.warmup_s");
      p.predicted_eval_s = seconds(ph, "eval_s", "predicted.phases.eval_s");
      p.predicted_checkpoint_s = seconds(ph, "checkpoint_s", "predicted.phases.checkpoint_s");
    }
  }
  p.time_limit_s = seconds(j, "time_limit_s", "time_limit_s");
  return p;
}

void ApplyPlan(const LaunchPlan& plan, TrainSpec* spec) {
  if (!plan.present) return;
  if (plan.global_batch > int64_t(1) << 30) throw UsageError("DLH_PLAN: global_batch: too large");
  spec->batch_size = int(plan.global_batch);
  spec->optimizer.lr = plan.lr;
  spec->schedule.warmup_epochs = std::min(plan.warmup_epochs, double(spec->epochs));
}

}  // namespace dlh
