// Tests of what a job's GELUs and SiLUs cost beyond the step-time model's price of them
// (estimator/model/activation_cost.cpp), of their measurement and of their place in a
// calibration file.
#include "estimator/model/activation_cost.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/spec.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/time_model.hpp"
#include "launcher/nn/thread_pool.hpp"
#include "tests/util/estimate_error_of.hpp"

namespace dlh {
namespace {

using nlohmann::json;

ActivationCost Measured() {
  ActivationCost c;
  c.values = 65536;
  c.gelu_forward_s = 3e-9;
  c.gelu_backward_s = 5e-9;
  c.silu_forward_s = 1e-9;
  c.silu_backward_s = 2e-9;
  return c;
}

// The features of a spec of 1x4x4 inputs and these layers.
ModelFeatures FeaturesOf(const std::string& layers) {
  return ComputeFeatures(ParseSpec(R"({"name": "t", "input": {"channels": 1, "height": 4,
      "width": 4}, "classes": 10, "layers": [)" +
                                       layers + R"(], "optimizer": {"type": "sgd",
      "lr": 0.1}, "batch_size": 8, "epochs": 1, "dataset": "x.h5"})",
                                   "t.json", ""));
}

constexpr double kRate = 1e-10;  // the model's price of an element-wise FLOP

TEST(ActivationCost, EachValueAtItsMeasuredCostLessTheModelsPriceOfItsFlops) {
  const ModelFeatures f = FeaturesOf(R"({"type": "flatten"}, {"type": "dense", "units": 16},
      {"type": "gelu"}, {"type": "dense", "units": 8}, {"type": "silu"},
      {"type": "dense", "units": 10})");
  // GELU: 16 values at 3 + 5 ns, less 10 + 12 FLOPs a value (features.cpp); SiLU: 8 values at
  // 1 + 2 ns, less 5 + 6 FLOPs a value.
  const double gelu = 16 * 8e-9 - 16 * 22 * kRate, silu = 8 * 3e-9 - 8 * 11 * kRate;
  EXPECT_NEAR(ActivationExtraSecondsPerSample(Measured(), f, kRate), gelu + silu, 1e-18);
  // On a device twice as fast at arithmetic, under a model that prices a FLOP at kRate there.
  EXPECT_NEAR(ActivationExtraSecondsPerSample(Measured(), f, kRate, 2),
              (gelu + silu) - (16 * 8e-9 + 8 * 3e-9) / 2, 1e-18);
  EXPECT_EQ(ActivationExtraSecondsPerSample(ActivationCost{}, f, kRate), 0);  // not measured
  EXPECT_EQ(ActivationExtraSecondsPerSample(
                Measured(), FeaturesOf(R"({"type": "flatten"}, {"type": "dense", "units": 16},
                    {"type": "relu"}, {"type": "dense", "units": 10})"),
                kRate),
            0);  // the sweep's activations: priced by the model already
}

TEST(ActivationCost, InsideResidualBlocksAndAtTheBottom) {
  const ModelFeatures nested = FeaturesOf(R"({"type": "flatten"}, {"type": "dense", "units": 16},
      {"type": "residual", "layers": [{"type": "dense", "units": 16}, {"type": "gelu"},
      {"type": "dense", "units": 16}]}, {"type": "dense", "units": 10})");
  EXPECT_NEAR(ActivationExtraSecondsPerSample(Measured(), nested, kRate),
              16 * 8e-9 - 16 * 22 * kRate, 1e-18);
  // The bottom layer's input gradient is never computed: its forward pass alone.
  const ModelFeatures bottom = FeaturesOf(R"({"type": "gelu"}, {"type": "flatten"},
      {"type": "dense", "units": 10})");
  EXPECT_NEAR(ActivationExtraSecondsPerSample(Measured(), bottom, kRate),
              16 * 3e-9 - 16 * 10 * kRate, 1e-18);
}

TEST(ActivationCost, ACalibrationAddsItToAStep) {
  Calibration c;
  c.device = c.model.device = "cpu";
  c.model.coef = {1e-3, 2e-11, 5e-11, kRate, 1e-9, 2e-9, 4e-9, 1e-4, 5e-5, 0, 0};
  const ModelFeatures f = FeaturesOf(R"({"type": "flatten"}, {"type": "dense", "units": 16},
      {"type": "gelu"}, {"type": "dense", "units": 10})");
  EXPECT_EQ(CalibratedActivationSeconds(c, f, 32), 0);  // an older file: none timed
  c.activation_cost = Measured();
  EXPECT_NEAR(CalibratedActivationSeconds(c, f, 32), 32 * (16 * 8e-9 - 16 * 22 * kRate), 1e-15);
}

TEST(ActivationCost, CalibrationFilesKeepItAndNameItsDamage) {
  Calibration c;
  c.device = c.model.device = "cpu";
  c.host = "test";
  c.threads = 2;
  c.created = "2026-12-04T00:00:00Z";
  c.model.coef = {1e-3, 2e-11, 5e-11, 3e-9, 1e-9, 2e-9, 4e-9, 1e-4, 5e-5, 0, 0};
  c.activation_cost = Measured();
  const json j = CalibrationToJson(c);
  EXPECT_EQ(j["activation_cost"], json::parse(R"({"values": 65536, "seconds_per_value":
      {"gelu_forward": 3e-9, "gelu_backward": 5e-9, "silu_forward": 1e-9,
       "silu_backward": 2e-9}})"));
  const Calibration back = CalibrationFromJson(json::parse(j.dump()), "cal.json");
  EXPECT_EQ(back.activation_cost.values, 65536);
  EXPECT_EQ(back.activation_cost.gelu_backward_s, 5e-9);
  EXPECT_EQ(back.activation_cost.silu_forward_s, 1e-9);
  json old = j;
  old.erase("activation_cost");
  EXPECT_TRUE(CalibrationFromJson(old, "old.json").activation_cost.empty());
  c.activation_cost = ActivationCost{};
  EXPECT_FALSE(CalibrationToJson(c).contains("activation_cost"));

  auto error = [&](const std::function<void(json&)>& edit) {
    return EditedCalibrationError(j, edit);
  };
  EXPECT_EQ(error([](json& b) { b["activation_cost"] = "fast"; }),
            "cal.json: activation_cost: must be a JSON object, got \"fast\"");
  EXPECT_EQ(error([](json& b) { b["activation_cost"]["values"] = 2.5; }),
            "cal.json: activation_cost.values: must be a positive integer, got 2.5");
  EXPECT_EQ(error([](json& b) { b["activation_cost"]["seconds_per_value"]["gelu_forward"] = 0; }),
            "cal.json: activation_cost.seconds_per_value.gelu_forward: must be a positive "
            "number, got 0");
  EXPECT_EQ(
      error([](json& b) { b["activation_cost"]["seconds_per_value"].erase("silu_backward"); }),
      "cal.json: activation_cost.seconds_per_value.silu_backward: required");
  EXPECT_EQ(error([](json& b) { b["activation_cost"]["seconds_per_value"]["tanh_forward"] = 1; }),
            "cal.json: activation_cost.seconds_per_value: unknown key \"tanh_forward\"");
  EXPECT_EQ(error([](json& b) { b["activation_cost"]["rows"] = 1; }),
            "cal.json: activation_cost: unknown key \"rows\"");
}

// The engine's own layers, timed; and at the threads asked for.
TEST(ActivationCost, MeasuredByTheEngine) {
  const int before = CpuThreads();
  const ActivationCost c = MeasureActivationCost(1, true);
  EXPECT_EQ(CpuThreads(), 1);
  EXPECT_EQ(c.values, 65536);
  EXPECT_GT(c.gelu_forward_s, 0);
  EXPECT_GT(c.gelu_backward_s, 0);
  EXPECT_GT(c.silu_forward_s, 0);
  EXPECT_GT(c.silu_backward_s, 0);
  SetCpuThreads(before);
}

}  // namespace
}  // namespace dlh
