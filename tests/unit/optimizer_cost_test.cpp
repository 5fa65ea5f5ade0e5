// Tests of a job's optimizer beyond the calibration sweep's (estimator/model/optimizer_cost.cpp)
// and of its measurement and place in a calibration file.
#include "estimator/model/optimizer_cost.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/error.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/time_model.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "tests/util/estimate_error_of.hpp"

namespace dlh {
namespace {

using nlohmann::json;

OptimizerUpdateCost Measured() {
  OptimizerUpdateCost c;
  c.params = 1000;
  c.sgd_s = 0.05e-9;
  c.momentum_s = 0.1e-9;
  c.adam_s = 0.9e-9;
  return c;
}

TEST(OptimizerCost, TheKindOfAnUpdate) {
  OptimizerSpec o;
  EXPECT_STREQ(OptimizerUpdateKind(o), "sgd");
  o.momentum = 0.9;
  o.nesterov = true;
  EXPECT_STREQ(OptimizerUpdateKind(o), "momentum");
  o.kind = OptimizerSpec::Kind::Adam;
  EXPECT_STREQ(OptimizerUpdateKind(o), "adam");
}

TEST(OptimizerCost, WhatAJobsOptimizerAddsOverTheSweeps) {
  OptimizerSpec adam, momentum, sgd;
  adam.kind = OptimizerSpec::Kind::Adam;
  momentum.momentum = 0.9;
  EXPECT_NEAR(OptimizerExtraSeconds(Measured(), adam, 1e6), 0.8e-3, 1e-12);
  EXPECT_NEAR(OptimizerExtraSeconds(Measured(), adam, 1e6, 2), 0.4e-3, 1e-12);
  EXPECT_EQ(OptimizerExtraSeconds(Measured(), momentum, 1e6), 0);
  EXPECT_NEAR(OptimizerExtraSeconds(Measured(), sgd, 1e6), -0.05e-3, 1e-12);
  EXPECT_EQ(OptimizerExtraSeconds(OptimizerUpdateCost{}, adam, 1e6), 0);  // not measured
}

TEST(OptimizerCost, StaleSynchronousOwnStepsAreUpdatesAndACopyOfTheModelAndState) {
  OptimizerSpec adam, momentum;
  adam.kind = OptimizerSpec::Kind::Adam;
  momentum.momentum = 0.9;
  // Staleness 2, momentum (1 slot): 2 updates of 0.1 ns and a copy of 2 arrays at 3 x 0.1 ns.
  EXPECT_NEAR(OwnStepsSeconds(Measured(), momentum, 2, 1, 1e6), 1e6 * (0.2e-9 + 0.6e-9), 1e-12);
  EXPECT_NEAR(OwnStepsSeconds(Measured(), adam, 1, 2, 1e6), 1e6 * (0.9e-9 + 0.9e-9), 1e-12);
  EXPECT_NEAR(OwnStepsSeconds(Measured(), momentum, 2, 1, 1e6, 2),
              OwnStepsSeconds(Measured(), momentum, 2, 1, 1e6) / 2, 1e-15);
  EXPECT_EQ(OwnStepsSeconds(Measured(), momentum, 0, 1, 1e6), 0);             // synchronous
  EXPECT_EQ(OwnStepsSeconds(OptimizerUpdateCost{}, momentum, 2, 1, 1e6), 0);  // not measured
}

TEST(OptimizerCost, CalibrationFilesKeepItAndNameItsDamage) {
  Calibration c;
  c.device = c.model.device = "cpu";
  c.host = "test";
  c.threads = 2;
  c.created = "2026-12-01T00:00:00Z";
  c.model.coef = {1e-3, 2e-11, 5e-11, 3e-9, 1e-9, 2e-9, 4e-9, 1e-4, 5e-5, 0, 0};
  c.optimizer_update = Measured();
  const json j = CalibrationToJson(c);
  EXPECT_EQ(j["optimizer_update"], json::parse(R"({"params": 1000, "seconds_per_param":
                            {"sgd": 5e-11, "momentum": 1e-10, "adam": 9e-10}})"));
  const Calibration back = CalibrationFromJson(json::parse(j.dump()), "cal.json");
  EXPECT_EQ(back.optimizer_update.params, 1000);
  EXPECT_EQ(back.optimizer_update.adam_s, 0.9e-9);
  json old = j;
  old.erase("optimizer_update");
  EXPECT_TRUE(CalibrationFromJson(old, "old.json").optimizer_update.empty());
  c.optimizer_update = OptimizerUpdateCost{};
  EXPECT_FALSE(CalibrationToJson(c).contains("optimizer_update"));

  auto error = [&](const std::function<void(json&)>& edit) {
    return EditedCalibrationError(j, edit);
  };
  EXPECT_EQ(error([](json& b) { b["optimizer_update"] = 3; }),
            "cal.json: optimizer_update: must be a JSON object, got 3");
  EXPECT_EQ(error([](json& b) { b["optimizer_update"]["params"] = 0; }),
            "cal.json: optimizer_update.params: must be a positive integer, got 0");
  EXPECT_EQ(error([](json& b) { b["optimizer_update"]["seconds_per_param"]["adam"] = -1; }),
            "cal.json: optimizer_update.seconds_per_param.adam: must be a positive number, got -1");
  EXPECT_EQ(error([](json& b) { b["optimizer_update"]["seconds_per_param"].erase("sgd"); }),
            "cal.json: optimizer_update.seconds_per_param.sgd: required");
  EXPECT_EQ(error([](json& b) { b["optimizer_update"]["seconds_per_param"]["lamb"] = 1; }),
            "cal.json: optimizer_update.seconds_per_param: unknown key \"lamb\"");
  EXPECT_EQ(error([](json& b) { b["optimizer_update"]["rows"] = 1; }),
            "cal.json: optimizer_update: unknown key \"rows\"");
}

// The engine's own update of each kind, timed on a parameter array of about a million.
TEST(OptimizerCost, MeasuredByTheEngine) {
  const OptimizerUpdateCost c = MeasureOptimizerUpdate(1, true);
  EXPECT_GT(c.params, 1000000);
  EXPECT_GT(c.sgd_s, 0);
  EXPECT_GT(c.momentum_s, 0);
  EXPECT_GT(c.adam_s, 0);
}

// A timing at fewer threads than the one before it runs at that count: the engine's pool
// adopts OpenBLAS's count only where it is above 1 (thread_pool.hpp), and before 2026-12-01
// the calibration's thread scaling timed "1 thread" on the pool of 2.
TEST(OptimizerCost, TimingsSetTheEnginesThreads) {
  const int before = CpuThreads();
  SweepEntry e = CalibrationSweep(true).front();
  TimingOptions o;
  o.warmup = 0;
  o.repeats = 1;
  o.steps_per_repeat = 1;
  o.threads = 2;
  TimeTrainingStep(e, o);
  EXPECT_EQ(CpuThreads(), 2);
  o.threads = 1;
  TimeTrainingStep(e, o);
  EXPECT_EQ(CpuThreads(), 1);
  MeasureOptimizerUpdate(2, true);
  EXPECT_EQ(CpuThreads(), 2);
  SetCpuThreads(before);
}

}  // namespace
}  // namespace dlh
