// Tests of the layer model (estimator/model/layer_time_model.cpp): its fit to layers timed one
// by one, its bad input, and its place in a calibration file.
#include "estimator/model/layer_time_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/time_model.hpp"
#include "tests/util/estimate_error_of.hpp"

namespace dlh {
namespace {

using nlohmann::json;

// Overhead and update 0: a layer's own time has neither.
const std::vector<double> kLayerCoef{0,    2e-11, 5e-11, 3e-9, 0,    2e-9, 4e-9,
                                     1e-4, 5e-5,  3e-6,  1e-9, 3e-5, 6e-10};

// Every layer of the quick calibration sweep's models that takes time of its own on the CPU
// engine, timed as `coef` says (times `noise(i)`).
std::vector<LayerTimingSample> Rows(const std::vector<double>& coef,
                                    const std::function<double(int)>& noise = nullptr) {
  LayerTimeModel truth;
  truth.coef = coef;
  std::vector<LayerTimingSample> out;
  for (const SweepEntry& e : CalibrationSweep(true)) {
    const int64_t batch = e.batch;
    const std::vector<ModelFeatures> layers = TopLevelLayerFeatures(e.spec);
    for (size_t i = 0; i < layers.size(); ++i) {
      LayerTimingSample s;
      s.model = e.spec.name;
      s.layer = int(i);
      s.batch = batch;
      s.features = layers[i];
      s.seconds = LayerSeconds(truth, layers[i], batch, true);
      if (!(s.seconds > 0)) continue;  // runs inside the layer before (or has no work)
      if (noise) s.seconds *= noise(int(out.size()));
      out.push_back(s);
    }
  }
  return out;
}

TEST(LayerTimeModelTest, OnlyTheLayersOwnTermsCount) {
  EXPECT_FALSE(IsLayerTerm(0));  // the step's overhead
  EXPECT_FALSE(IsLayerTerm(4));  // the optimizer's update, timed apart
  for (int j : {1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12}) EXPECT_TRUE(IsLayerTerm(j)) << j;
  EXPECT_FALSE(IsLayerTerm(-1));
  EXPECT_FALSE(IsLayerTerm(kLayerTerms));
  ASSERT_EQ(LayerTermNames().size(), size_t(kLayerTerms));
  EXPECT_EQ(LayerSeconds(LayerTimeModel{}, ModelFeatures{}, 64, true), 0);
}

// An element-wise layer that runs on its own costs a fixed time and time per value in and
// out; one the CPU engine runs inside the convolution before it, and the GEMM layers, cost
// neither (their terms are the step-time model's).
TEST(LayerTimeModelTest, ElementWiseLayersCountTheirValues) {
  TrainSpec spec = ParseSpec(R"({"name": "t", "input": {"channels": 1, "height": 8, "width": 8},
    "classes": 10, "layers": [{"type": "conv2d", "filters": 4, "kernel": 3, "padding": 1},
      {"type": "relu"}, {"type": "batchnorm"}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
      {"type": "flatten"}, {"type": "dense", "units": 10}],
    "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 2, "epochs": 1, "dataset": "d.h5"})",
                             "t.json", "");
  const std::vector<ModelFeatures> layers = TopLevelLayerFeatures(spec);
  ASSERT_EQ(layers.size(), 7u);
  auto own = [&](size_t i, bool cpu) {
    const std::vector<double> t = LayerTerms(layers[i], 2, cpu);
    return std::make_pair(t[11], t[12]);
  };
  EXPECT_EQ(own(0, true), std::make_pair(0.0, 0.0));  // conv2d
  EXPECT_EQ(own(1, true), std::make_pair(0.0, 0.0));  // relu fused into the conv (CPU)
  EXPECT_EQ(own(1, false), std::make_pair(1.0, 2.0 * (256 + 256)));  // a GPU runs it
  EXPECT_EQ(own(2, true), std::make_pair(1.0, 2.0 * (256 + 256)));   // batchnorm 4x8x8
  EXPECT_EQ(own(3, true), std::make_pair(1.0, 2.0 * (256 + 256)));   // relu after it
  EXPECT_EQ(own(4, true), std::make_pair(1.0, 2.0 * (256 + 64)));    // pool to 4x4x4
  EXPECT_EQ(own(5, true), std::make_pair(1.0, 2.0 * (64 + 64)));     // flatten
  EXPECT_EQ(own(6, true), std::make_pair(0.0, 0.0));                 // dense
  // The first 9 terms are the step-time model's own.
  const std::vector<double> t = LayerTerms(layers[4], 2, true);
  const std::vector<double> whole = TimeTerms(layers[4], 2, true);
  EXPECT_EQ(std::vector<double>(t.begin(), t.begin() + kTimeTerms), whole);
}

TEST(LayerTimeModelTest, FitRecoversExactCoefficients) {
  const std::vector<LayerTimingSample> rows = Rows(kLayerCoef);
  ASSERT_GT(rows.size(), 50u);
  const LayerTimeModel m = FitLayerTimeModel(rows, true);
  ASSERT_EQ(m.coef.size(), size_t(kLayerTerms));
  for (int j = 0; j < kLayerTerms; ++j)
    EXPECT_NEAR(m.coef[size_t(j)], kLayerCoef[size_t(j)], 1e-6 * kLayerCoef[size_t(j)] + 1e-20)
        << LayerTermNames()[size_t(j)];
  EXPECT_EQ(m.samples, int(rows.size()));
  EXPECT_LT(m.step_error, 1e-6);
}

// The error of a layer counts as a share of its model's step: a row 10x off costs the fit in
// proportion to the layer's part of the step, so a tiny layer's noise barely moves the
// coefficients that price the large ones.
TEST(LayerTimeModelTest, ATinyLayersNoiseMovesTheFitLittle) {
  std::vector<LayerTimingSample> rows = Rows(kLayerCoef);
  size_t smallest = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].seconds < rows[smallest].seconds) smallest = i;
  rows[smallest].seconds *= 10;
  const LayerTimeModel m = FitLayerTimeModel(rows, true);
  EXPECT_NEAR(m.coef[1], kLayerCoef[1], 0.05 * kLayerCoef[1]);  // the convolutions' FLOPs
  EXPECT_GT(m.step_error, 0);
}

TEST(LayerTimeModelTest, BadSamplesAreNamed) {
  std::vector<LayerTimingSample> rows = Rows(kLayerCoef);
  rows[1].seconds = -1;
  EXPECT_EQ(EstimateErrorOf([&] { FitLayerTimeModel(rows, true); }),
            "layer_samples[1].seconds: must be a positive number, got -1.0");
  rows = Rows(kLayerCoef);
  rows[2].batch = 0;
  EXPECT_EQ(EstimateErrorOf([&] { FitLayerTimeModel(rows, true); }),
            "layer_samples[2].batch: must be a positive integer, got 0");
  rows = Rows(kLayerCoef);
  rows.resize(3);
  EXPECT_EQ(
      EstimateErrorOf([&] { FitLayerTimeModel(rows, true); }).rfind("too few layer samples", 0),
      0u);
  EXPECT_EQ(EstimateErrorOf([&] { FitLayerTimeModel({}, true); }).rfind("too few layer samples", 0),
            0u);
}

Calibration WithLayerModel() {
  Calibration c;
  c.device = c.model.device = "cpu";
  c.host = "test";
  c.threads = 2;
  c.created = "2026-12-01T00:00:00Z";
  c.model.coef = {1e-3, 2e-11, 5e-11, 3e-9, 1e-9, 2e-9, 4e-9, 1e-4, 5e-5, 0, 0};
  c.layer_model.coef = kLayerCoef;
  c.layer_model.samples = 660;
  c.layer_model.step_error = 1.5;
  return c;
}

TEST(LayerTimeModelTest, CalibrationFilesKeepIt) {
  const json j = CalibrationToJson(WithLayerModel());
  EXPECT_EQ(j["layer_model"]["coef"], json(kLayerCoef));
  const Calibration back = CalibrationFromJson(json::parse(j.dump()), "cal.json");
  EXPECT_EQ(back.layer_model.coef, kLayerCoef);
  EXPECT_EQ(back.layer_model.samples, 660);
  EXPECT_EQ(back.layer_model.step_error, 1.5);
  // Older files and GPU calibrations have none.
  json old = j;
  old.erase("layer_model");
  EXPECT_TRUE(CalibrationFromJson(old, "old.json").layer_model.empty());
  // Files made before the element-wise terms: the step-time model's 9 terms of then only;
  // those made before the per-sample convolution terms: those 9, then the element-wise two.
  // Each loads with the terms it lacks 0.
  json nine = j;
  nine["layer_model"]["coef"] =
      json(std::vector<double>(kLayerCoef.begin(), kLayerCoef.begin() + 9));
  std::vector<double> want(kLayerCoef.begin(), kLayerCoef.begin() + 9);
  want.resize(size_t(kLayerTerms), 0.0);
  EXPECT_EQ(CalibrationFromJson(nine, "nine.json").layer_model.coef, want);
  json eleven = nine;
  eleven["layer_model"]["coef"].push_back(3e-5);
  eleven["layer_model"]["coef"].push_back(6e-10);
  want[11] = 3e-5;
  want[12] = 6e-10;
  EXPECT_EQ(CalibrationFromJson(eleven, "eleven.json").layer_model.coef, want);
  Calibration none = WithLayerModel();
  none.layer_model = LayerTimeModel{};
  EXPECT_FALSE(CalibrationToJson(none).contains("layer_model"));

  auto error = [&](const std::function<void(json&)>& edit) {
    return EditedCalibrationError(j, edit);
  };
  EXPECT_EQ(error([](json& b) {
              b["layer_model"]["coef"] = json::array({1, 2});
            }),
            "cal.json: layer_model.coef: must be an array of 13 non-negative numbers (one per "
            "term), got an array of 2 items");
  EXPECT_EQ(error([](json& b) { b["layer_model"]["coef"][3] = -1; }),
            "cal.json: layer_model.coef[3]: must be a non-negative number, got -1");
  EXPECT_EQ(error([](json& b) { b["layer_model"].erase("samples"); }),
            "cal.json: layer_model.samples: required");
  EXPECT_EQ(error([](json& b) { b["layer_model"]["rows"] = 1; }),
            "cal.json: layer_model: unknown key \"rows\"");
  EXPECT_EQ(error([](json& b) { b["layer_model"] = 3; }),
            "cal.json: layer_model: must be a JSON object, got 3");
}

}  // namespace
}  // namespace dlh
