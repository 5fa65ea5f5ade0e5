// Tests of the step-time model (estimator/model/time_model.cpp): design rows, the non-negative
// relative-error fit and its cross-validation, and calibration files.
#include "estimator/model/time_model.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "tests/util/estimate_error_of.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<double> kCoef{1e-3, 2e-11, 5e-11, 3e-9, 1e-9, 2e-9, 4e-9, 1e-4, 5e-5, 3e-6, 2e-9};

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}
bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A CNN or MLP of the kind the calibration sweep varies.
TrainSpec Model(int channels, int size, int conv_layers, int filters, int dense_layers, int nodes) {
  TrainSpec s;
  s.origin = "model";
  s.input = {channels, size, size};
  s.classes = 10;
  auto add = [&](LayerKind kind) {
    LayerSpec l;
    l.kind = kind;
    s.layers.push_back(l);
    return &s.layers.back();
  };
  for (int i = 0; i < conv_layers; ++i) {
    LayerSpec* c = add(LayerKind::Conv2d);
    c->filters = filters << i;
    c->kernel = 3;
    c->padding = 1;
    add(LayerKind::Relu);
    LayerSpec* p = add(LayerKind::MaxPool2d);
    p->kernel = 2;
    p->stride = 2;
  }
  add(LayerKind::Flatten);
  for (int i = 0; i < dense_layers; ++i) {
    add(LayerKind::Dense)->units = nodes;
    add(LayerKind::Relu);
  }
  add(LayerKind::Dense)->units = 10;
  return s;
}

double Dot(const std::vector<double>& c, const std::vector<double>& x) {
  double s = 0;
  for (size_t j = 0; j < c.size(); ++j) s += c[j] * x[j];
  return s;
}

// ~30 varied configurations timed exactly as the model with coefficients `c` says,
// each time multiplied by (1 + noise * N(0, 1)).
std::vector<TimingSample> Synthetic(const std::vector<double>& c, double noise = 0,
                                    int count = 30) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> gauss(0, 1);
  std::vector<TimingSample> out;
  for (int i = 0; i < count; ++i) {
    const int channels = i % 2 == 0 ? 1 : 3;
    const int size = 16 << (i % 3);          // 16, 32, 64
    const int conv = i % 4;                  // 0..3 conv layers
    const int filters = 8 << ((i / 2) % 3);  // 8, 16, 32
    const int dense = (i / 3) % 3;           // 0..2 hidden dense layers
    const int nodes = 64 << ((i / 5) % 4);   // 64..512
    TimingSample s;
    s.model = "m" + std::to_string(i);
    s.features = ComputeFeatures(Model(channels, size, conv, filters, dense, nodes));
    s.batch = 16 << ((i * 7) % 5);  // 16..256
    s.seconds = Dot(c, TimeTerms(s.features, s.batch, true));
    if (noise > 0) s.seconds *= 1 + noise * gauss(rng);
    s.joules = i % 3 == 0 ? -1 : 2.5 * s.seconds;
    out.push_back(s);
  }
  return out;
}

TEST(TimeModelTest, TermNames) {
  EXPECT_EQ(TimeTermNames(),
            (std::vector<std::string>{
                "overhead_s", "conv_s_per_flop", "dense_s_per_flop", "elementwise_s_per_flop",
                "update_s_per_param", "im2col_s_per_value", "conv_out_s_per_value", "conv_layer_s",
                "dense_layer_s", "conv_sample_s", "conv_weight_s_per_value"}));
  EXPECT_EQ(int(TimeTermNames().size()), kTimeTerms);
}

TEST(TimeModelTest, TermsAndSeconds) {
  ModelFeatures f;
  f.conv_flops_fwd = 1e6;
  f.conv_flops_bwd = 2e6;
  f.dense_flops_fwd = 1e5;
  f.dense_flops_bwd = 2e5;
  f.other_flops_fwd = 4e3;  // the element-wise term: other FLOPs fwd + bwd
  f.other_flops_bwd = 6e3;
  f.activation_elements = 7;  // not a term
  f.params = 5e4;
  f.conv_workspace_elements = 2e3;
  f.conv_output_elements = 3e3;
  f.conv_layers = 2;  // the per-layer terms do not grow with the batch
  f.dense_layers = 3;
  f.conv_weight_elements = 4e2;  // read by every sample's GEMMs on the CPU engine
  EXPECT_EQ(TimeTerms(f, 10, true),
            (std::vector<double>{1, 3e7, 3e6, 1e5, 5e4, 2e4, 3e4, 2, 3, 20, 4e3}));
  // A GPU engine convolves the batch at once: no per-sample convolution terms.
  EXPECT_EQ(TimeTerms(f, 10, false),
            (std::vector<double>{1, 3e7, 3e6, 1e5, 5e4, 2e4, 3e4, 2, 3, 0, 0}));
  // Element-wise work the CPU engine runs inside its convolutions: out of a CPU model's
  // element-wise term, in a GPU model's.
  ModelFeatures fused = f;
  fused.cpu_fused_flops_fwd = 1e3;
  fused.cpu_fused_flops_bwd = 2e3;
  EXPECT_EQ(TimeTerms(fused, 10, true)[3], 7e4);
  EXPECT_EQ(TimeTerms(fused, 10, false)[3], 1e5);
  // Backward work the CPU engine never runs (below the lowest layer with parameters): out of
  // a CPU model's terms, in a GPU model's.
  ModelFeatures skipped = f;
  skipped.cpu_skipped_conv_flops_bwd = 1e6;
  skipped.cpu_skipped_dense_flops_bwd = 1e5;
  skipped.cpu_skipped_other_flops_bwd = 4e3;
  skipped.cpu_skipped_workspace_elements = 5e2;
  EXPECT_EQ(TimeTerms(skipped, 10, true),
            (std::vector<double>{1, 2e7, 2e6, 6e4, 5e4, 1.5e4, 3e4, 2, 3, 20, 4e3}));
  EXPECT_EQ(TimeTerms(skipped, 10, false), TimeTerms(f, 10, false));
  EXPECT_TRUE(CpuEngineDevice("cpu"));
  EXPECT_FALSE(CpuEngineDevice("cuda:0 (NVIDIA H100 80GB HBM3)"));
  TimeModel m;
  m.coef = kCoef;
  // 1e-3 + 3e7*2e-11 + 3e6*5e-11 + 1e5*3e-9 + 5e4*1e-9 + 2e4*2e-9 + 3e4*4e-9 + 2*1e-4 + 3*5e-5
  //   + 20*3e-6 + 4e3*2e-9
  //   = 1e-3 + 6e-4 + 1.5e-4 + 3e-4 + 5e-5 + 4e-5 + 1.2e-4 + 2e-4 + 1.5e-4 + 6e-5 + 8e-6
  //   = 2.678e-3
  EXPECT_NEAR(m.seconds(f, 10), 2.678e-3, 1e-15);
  m.coef.pop_back();
  EXPECT_THROW(m.seconds(f, 10), EstimateError);
}

TEST(TimeModelTest, FitRecoversExactCoefficients) {
  const std::vector<TimingSample> samples = Synthetic(kCoef);
  const TimeModel m = FitTimeModel("cpu", samples);
  EXPECT_EQ(m.device, "cpu");
  ASSERT_EQ(m.coef.size(), size_t(kTimeTerms));
  for (int j = 0; j < kTimeTerms; ++j)
    EXPECT_NEAR(m.coef[j] / kCoef[j], 1.0, 1e-9) << TimeTermNames()[j];
  EXPECT_EQ(m.quality.samples, 30);
  EXPECT_EQ(m.quality.folds, 5);
  EXPECT_NEAR(m.quality.r2, 1.0, 1e-12);
  EXPECT_LT(m.quality.mape, 1e-8);
  EXPECT_LT(m.quality.cv_mape, 1e-6);
  EXPECT_LT(m.quality.cv_log_sigma, 1e-6);
  for (const TimingSample& s : samples)
    EXPECT_NEAR(m.seconds(s.features, s.batch) / s.seconds, 1.0, 1e-10);

  // Leave-one-out (folds == samples) and the minimum sample count work too.
  EXPECT_LT(FitTimeModel("cpu", samples, 30).quality.cv_mape, 1e-6);
  const std::vector<TimingSample> least(samples.begin(), samples.begin() + 2 * kTimeTerms);
  EXPECT_NO_THROW(FitTimeModel("cpu", least, 2));
}

TEST(TimeModelTest, NoiseShowsInCrossValidation) {
  const TimeModel m = FitTimeModel("cpu", Synthetic(kCoef, 0.05));
  EXPECT_GT(m.quality.mape, 0.5);
  EXPECT_GT(m.quality.cv_mape, 0.5);
  // Noise of 5% (normal): the held-out spread is of that size.
  EXPECT_GT(m.quality.cv_log_sigma, 0.01);
  EXPECT_LT(m.quality.cv_log_sigma, 0.12);
  EXPECT_GT(m.quality.r2, 0.9);
  EXPECT_LT(m.quality.r2, 1.0);
  for (double c : m.coef) EXPECT_GE(c, 0);
  // Same data, same folds: the fit is deterministic.
  const TimeModel again = FitTimeModel("cpu", Synthetic(kCoef, 0.05));
  EXPECT_EQ(again.coef, m.coef);
  EXPECT_EQ(again.quality.cv_mape, m.quality.cv_mape);
  EXPECT_EQ(again.quality.cv_log_sigma, m.quality.cv_log_sigma);
  // More noise, a wider spread.
  EXPECT_GT(FitTimeModel("cpu", Synthetic(kCoef, 0.2)).quality.cv_log_sigma,
            m.quality.cv_log_sigma);
}

// The weighted design of the fit (rows TimeTerms / t, targets 1), for checks.
void Weighted(const std::vector<TimingSample>& samples, Eigen::MatrixXd* A, Eigen::VectorXd* y) {
  A->resize(Eigen::Index(samples.size()), kTimeTerms);
  *y = Eigen::VectorXd::Ones(Eigen::Index(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::vector<double> x = TimeTerms(samples[i].features, samples[i].batch, true);
    for (int j = 0; j < kTimeTerms; ++j) (*A)(Eigen::Index(i), j) = x[j] / samples[i].seconds;
  }
}

TEST(TimeModelTest, NonNegativeWhenDataPullsBelowZero) {
  // A negative element-wise rate makes the unconstrained optimum infeasible.
  const std::vector<double> c{2e-3, 2e-11, 5e-11, -2e-10, 1e-9};
  const std::vector<TimingSample> samples = Synthetic(c, 0.02);
  for (const TimingSample& s : samples) ASSERT_GT(s.seconds, 0);
  Eigen::MatrixXd A;
  Eigen::VectorXd y;
  Weighted(samples, &A, &y);
  // Scale the columns as the fit does, for a well-conditioned reference.
  Eigen::VectorXd scale = A.colwise().norm().cwiseInverse().transpose();
  const Eigen::MatrixXd As = A * scale.asDiagonal();
  const Eigen::VectorXd free = As.colPivHouseholderQr().solve(y);
  ASSERT_LT(free.minCoeff(), 0) << "the test data must drive a coefficient negative";

  const TimeModel m = FitTimeModel("cpu", samples);
  for (int j = 0; j < kTimeTerms; ++j) EXPECT_GE(m.coef[j], 0) << TimeTermNames()[j];
  EXPECT_EQ(m.coef[3], 0);

  // It is THE constrained optimum: no feasible restriction to a subset of the terms fits
  // better (exhaustive over every subset).
  Eigen::VectorXd got(kTimeTerms);
  for (int j = 0; j < kTimeTerms; ++j) got(j) = m.coef[j];
  const double got_res = (A * got - y).squaredNorm();
  double best = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < (1 << kTimeTerms); ++mask) {
    std::vector<int> cols;
    for (int j = 0; j < kTimeTerms; ++j)
      if (mask & (1 << j)) cols.push_back(j);
    Eigen::MatrixXd S(As.rows(), Eigen::Index(cols.size()));
    for (size_t k = 0; k < cols.size(); ++k) S.col(Eigen::Index(k)) = As.col(cols[k]);
    const Eigen::VectorXd s = S.colPivHouseholderQr().solve(y);
    if (s.minCoeff() < 0) continue;
    best = std::min(best, (S * s - y).squaredNorm());
  }
  EXPECT_NEAR(got_res, best, 1e-9 * best);
}

TEST(TimeModelTest, TooFewSamples) {
  const std::vector<TimingSample> all = Synthetic(kCoef);
  const std::vector<TimingSample> nine(all.begin(), all.begin() + 9);
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", nine); }),
            "too few samples to fit 11 terms: got 9, need at least 22");
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", {}); }),
            "too few samples to fit 11 terms: got 0, need at least 22");
  // A GPU has no per-sample convolution terms to fit.
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cuda:0 (NVIDIA H100 80GB HBM3)", nine); }),
            "too few samples to fit 9 terms: got 9, need at least 18");
}

TEST(TimeModelTest, BadFolds) {
  const std::vector<TimingSample> s = Synthetic(kCoef, 0, 22);
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", s, 1); }),
            "cross-validation folds must be between 2 and the number of samples (22), got 1");
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", s, 23); }),
            "cross-validation folds must be between 2 and the number of samples (22), got 23");
}

TEST(TimeModelTest, RankDeficient) {
  // Twelve timings of one configuration: every column is a multiple of the first.
  std::vector<TimingSample> same(22, Synthetic(kCoef)[5]);
  for (size_t i = 0; i < same.size(); ++i) same[i].seconds *= 1 + 0.01 * double(i);
  std::string msg = EstimateErrorOf([&] { FitTimeModel("cpu", same); });
  EXPECT_TRUE(
      StartsWith(msg, "cannot fit the time model: the design is rank-deficient (rank 1 of 11): "))
      << msg;
  EXPECT_TRUE(Contains(msg, "cannot be told apart from the other terms")) << msg;

  // One model at several batches: overhead and parameter updates are indistinguishable.
  std::vector<TimingSample> batches;
  for (int b = 1; b <= 22; ++b) {
    TimingSample s = Synthetic(kCoef)[5];
    s.batch = 8 * b;
    s.seconds = Dot(kCoef, TimeTerms(s.features, s.batch, true));
    batches.push_back(s);
  }
  msg = EstimateErrorOf([&] { FitTimeModel("cpu", batches); });
  EXPECT_TRUE(StartsWith(msg, "cannot fit the time model: the design is rank-deficient (rank"))
      << msg;
  EXPECT_TRUE(Contains(msg, "overhead_s") || Contains(msg, "update_s_per_param")) << msg;

  // No sample has a conv layer.
  std::vector<TimingSample> mlps;
  for (const TimingSample& s : Synthetic(kCoef, 0, 30))
    if (s.features.conv_layers == 0) mlps.push_back(s);
  ASSERT_GE(mlps.size(), 4u);
  while (mlps.size() < 22) mlps.insert(mlps.end(), mlps.begin(), mlps.begin() + 1);
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", mlps); }),
            "cannot fit the time model: the design is rank-deficient: conv_s_per_flop, "
            "im2col_s_per_value, conv_out_s_per_value, conv_layer_s, conv_sample_s, "
            "conv_weight_s_per_value has no work in any sample; the sweep must exercise every "
            "term");
}

TEST(TimeModelTest, RankDeficientTrainingFold) {
  // MLPs and just a few CNNs, which the convolution terms need: fine as a whole, but
  // a fold that holds a CNN out cannot separate those terms any more.
  std::vector<TimingSample> s;
  std::vector<TimingSample> cnns;
  for (const TimingSample& x : Synthetic(kCoef))
    (x.features.conv_layers == 0 ? s : cnns).push_back(x);
  ASSERT_EQ(s.size(), 8u);
  for (size_t i = 0; s.size() < 22; ++i) {  // more MLP rows, at other batches
    s.push_back(s[i]);
    s.back().batch *= 3;
    s.back().seconds = Dot(kCoef, TimeTerms(s.back().features, s.back().batch, true));
  }
  // The first (deterministic) choice of a few CNNs that makes the whole set fittable while
  // some training fold is not: the error must then name the fold.
  std::string msg;
  for (size_t k = 3; k <= 8 && !StartsWith(msg, "cross-validation fold "); ++k) {
    for (size_t first = 0; first + k <= cnns.size(); ++first) {
      std::vector<TimingSample> t = s;
      t.insert(t.end(), cnns.begin() + long(first), cnns.begin() + long(first + k));
      msg = EstimateErrorOf([&] { FitTimeModel("cpu", t, 2); });
      if (StartsWith(msg, "cross-validation fold ")) break;
    }
  }
  EXPECT_TRUE(StartsWith(msg, "cross-validation fold ")) << msg;
  EXPECT_TRUE(Contains(msg, " of 2: ")) << msg;
  EXPECT_TRUE(Contains(msg, "rank-deficient")) << msg;
}

TEST(TimeModelTest, BadSamples) {
  std::vector<TimingSample> s = Synthetic(kCoef, 0, 22);
  s[2].seconds = 0;
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", s); }),
            "samples[2].seconds: must be a positive number, got 0.0");
  s = Synthetic(kCoef, 0, 22);
  s[4].batch = 0;
  EXPECT_EQ(EstimateErrorOf([&] { FitTimeModel("cpu", s); }),
            "samples[4].batch: must be a positive integer, got 0");
}

// ---------------------------------------------------------------- calibration files

Calibration Example() {
  Calibration c;
  c.device = "cpu";
  c.host = "Test CPU @ 2.0GHz, 2 cores";
  c.threads = 2;
  c.created = "2026-11-21T12:00:00Z";
  c.samples = Synthetic(kCoef, 0.03, 22);
  c.model = FitTimeModel(c.device, c.samples, 4);
  return c;
}

void ExpectSameFeatures(const ModelFeatures& a, const ModelFeatures& b) {
  EXPECT_EQ(a.conv_flops_fwd, b.conv_flops_fwd);
  EXPECT_EQ(a.conv_flops_bwd, b.conv_flops_bwd);
  EXPECT_EQ(a.dense_flops_fwd, b.dense_flops_fwd);
  EXPECT_EQ(a.dense_flops_bwd, b.dense_flops_bwd);
  EXPECT_EQ(a.other_flops_fwd, b.other_flops_fwd);
  EXPECT_EQ(a.other_flops_bwd, b.other_flops_bwd);
  EXPECT_EQ(a.activation_elements, b.activation_elements);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.conv_workspace_elements, b.conv_workspace_elements);
  EXPECT_EQ(a.conv_output_elements, b.conv_output_elements);
  EXPECT_EQ(a.conv_weight_elements, b.conv_weight_elements);
  EXPECT_EQ(a.cpu_fused_flops_fwd, b.cpu_fused_flops_fwd);
  EXPECT_EQ(a.cpu_fused_flops_bwd, b.cpu_fused_flops_bwd);
  EXPECT_EQ(a.cpu_skipped_conv_flops_bwd, b.cpu_skipped_conv_flops_bwd);
  EXPECT_EQ(a.cpu_skipped_dense_flops_bwd, b.cpu_skipped_dense_flops_bwd);
  EXPECT_EQ(a.cpu_skipped_other_flops_bwd, b.cpu_skipped_other_flops_bwd);
  EXPECT_EQ(a.cpu_skipped_workspace_elements, b.cpu_skipped_workspace_elements);
  EXPECT_EQ(a.conv_layers, b.conv_layers);
  EXPECT_EQ(a.total_filters, b.total_filters);
  EXPECT_EQ(a.dense_layers, b.dense_layers);
  EXPECT_EQ(a.dense_nodes, b.dense_nodes);
  EXPECT_EQ(a.input_elements, b.input_elements);
}

void ExpectSame(const Calibration& a, const Calibration& b) {
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.threads, b.threads);
  EXPECT_EQ(a.created, b.created);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    EXPECT_EQ(a.samples[i].model, b.samples[i].model);
    EXPECT_EQ(a.samples[i].batch, b.samples[i].batch);
    EXPECT_EQ(a.samples[i].seconds, b.samples[i].seconds);  // exact: doubles round-trip
    EXPECT_EQ(a.samples[i].joules, b.samples[i].joules);
    ExpectSameFeatures(a.samples[i].features, b.samples[i].features);
    EXPECT_TRUE(b.samples[i].features.layers.empty());
  }
  EXPECT_EQ(b.model.device, a.device);
  EXPECT_EQ(a.model.coef, b.model.coef);
  EXPECT_EQ(a.model.quality.samples, b.model.quality.samples);
  EXPECT_EQ(a.model.quality.folds, b.model.quality.folds);
  EXPECT_EQ(a.model.quality.r2, b.model.quality.r2);
  EXPECT_EQ(a.model.quality.mape, b.model.quality.mape);
  EXPECT_EQ(a.model.quality.cv_mape, b.model.quality.cv_mape);
  EXPECT_EQ(a.model.quality.cv_log_sigma, b.model.quality.cv_log_sigma);
}

TEST(CalibrationTest, JsonRoundTrip) {
  const Calibration c = Example();
  const json j = CalibrationToJson(c);
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["model"]["terms"], json(TimeTermNames()));
  EXPECT_TRUE(j["samples"][0]["joules"].is_null());  // -1: not measured
  EXPECT_TRUE(j["samples"][1]["joules"].is_number());
  EXPECT_EQ(j["samples"][0]["features"].size(), 22u);
  EXPECT_EQ(j["samples"][0]["features"]["conv_layers"], 0);
  // A file from before the CPU engine fused layers: nothing fused.
  json old = j;
  for (json& s : old["samples"]) {
    s["features"].erase("cpu_fused_flops_fwd");
    s["features"].erase("cpu_fused_flops_bwd");
    for (const char* key : {"cpu_skipped_conv_flops_bwd", "cpu_skipped_dense_flops_bwd",
                            "cpu_skipped_other_flops_bwd", "cpu_skipped_workspace_elements"})
      s["features"].erase(key);
  }
  const Calibration before = CalibrationFromJson(old, "old.json");
  for (const TimingSample& s : before.samples)
    EXPECT_EQ(s.features.cpu_fused_flops_fwd + s.features.cpu_fused_flops_bwd, 0.0);
  // A file from before the convolutions' weights were counted: what the other sums leave of
  // the parameters, exact for these models (no batchnorm).
  json unweighed = j;
  for (json& s : unweighed["samples"]) s["features"].erase("conv_weight_elements");
  const Calibration derived = CalibrationFromJson(unweighed, "old.json");
  ASSERT_GT(c.samples[1].features.conv_weight_elements, 0);
  for (size_t i = 0; i < c.samples.size(); ++i) {
    EXPECT_DOUBLE_EQ(derived.samples[i].features.conv_weight_elements,
                     c.samples[i].features.conv_weight_elements)
        << i;
  }
  // A file from before the prediction band: no cross-validated spread, which reads as 0.
  EXPECT_TRUE(j["model"]["quality"].contains("cv_log_sigma"));
  json unbanded = j;
  unbanded["model"]["quality"].erase("cv_log_sigma");
  EXPECT_EQ(CalibrationFromJson(unbanded, "old.json").model.quality.cv_log_sigma, 0);
  json negative = j;
  negative["model"]["quality"]["cv_log_sigma"] = -0.1;
  EXPECT_EQ(EstimateErrorOf([&] { CalibrationFromJson(negative, "bad.json"); }),
            "bad.json: model.quality.cv_log_sigma: must be a non-negative number, got -0.1");
  const Calibration back = CalibrationFromJson(json::parse(j.dump()), "cal.json");
  ExpectSame(c, back);
  // Refitting the samples read back gives the same model.
  EXPECT_EQ(FitTimeModel(back.device, back.samples, 4).coef, c.model.coef);

  Calibration unfitted = c;
  unfitted.model.coef.clear();
  EXPECT_THROW(CalibrationToJson(unfitted), EstimateError);
}

// Issue 13: a calibration records the engine it timed; one from another engine is named.
// A file from before the per-layer terms names 7 terms with 7 coefficients: it loads with
// no per-layer cost (the model it was fitted as) and is written back with all 9.
TEST(CalibrationTest, SevenTermFileLoadsWithoutPerLayerCosts) {
  json j = CalibrationToJson(Example());
  const std::vector<std::string>& names = TimeTermNames();
  j["model"]["terms"] = std::vector<std::string>(names.begin(), names.begin() + kLegacyTimeTerms);
  std::vector<double> coef = j["model"]["coef"];
  const std::vector<double> all = coef;
  coef.resize(size_t(kLegacyTimeTerms));
  j["model"]["coef"] = coef;
  const Calibration c = CalibrationFromJson(j, "old.json");
  ASSERT_EQ(c.model.coef.size(), size_t(kTimeTerms));
  for (int k = 0; k < kLegacyTimeTerms; ++k) EXPECT_EQ(c.model.coef[size_t(k)], coef[size_t(k)]);
  for (int k = kLegacyTimeTerms; k < kTimeTerms; ++k) EXPECT_EQ(c.model.coef[size_t(k)], 0);
  EXPECT_EQ(CalibrationToJson(c)["model"]["terms"], json(names));

  j["model"]["coef"] = all;  // 7 names, 11 coefficients
  EXPECT_EQ(EstimateErrorOf([&] { CalibrationFromJson(j, "old.json"); }),
            "old.json: model.coef: must be an array of 7 non-negative numbers (one per term), "
            "got an array of 11 items");

  // From before the per-sample convolution terms: 9 names and coefficients, the two new 0.
  j["model"]["terms"] = std::vector<std::string>(names.begin(), names.begin() + kPerLayerTimeTerms);
  j["model"]["coef"] = std::vector<double>(all.begin(), all.begin() + kPerLayerTimeTerms);
  const Calibration nine = CalibrationFromJson(j, "old.json");
  ASSERT_EQ(nine.model.coef.size(), size_t(kTimeTerms));
  for (int k = 0; k < kTimeTerms; ++k)
    EXPECT_EQ(nine.model.coef[size_t(k)], k < kPerLayerTimeTerms ? all[size_t(k)] : 0.0);
}

TEST(CalibrationTest, RecordsItsEngineAndSaysWhenStale) {
  Calibration c = Example();
  EXPECT_NE(CalibrationStaleness(c).find("records no engine (made before fingerprints), this "
                                         "build's engine is " +
                                         EngineFingerprint(c.device)),
            std::string::npos);
  c.engine = EngineFingerprint(c.device);
  c.compiler = "gcc 12.2.0";
  c.blas = "OpenBLAS 0.3.21";
  EXPECT_EQ(CalibrationStaleness(c), "");
  const Calibration back = CalibrationFromJson(json::parse(CalibrationToJson(c).dump()), "c.json");
  EXPECT_EQ(back.engine, c.engine);
  EXPECT_EQ(back.compiler, "gcc 12.2.0");
  EXPECT_EQ(back.blas, "OpenBLAS 0.3.21");
  EXPECT_EQ(CalibrationStaleness(back), "");
  c.engine = "000000000000";
  EXPECT_EQ(CalibrationStaleness(c), "measured with engine 000000000000, this build's engine is " +
                                         EngineFingerprint(c.device) +
                                         ": recalibrate (dlh-estimate calibrate)");
  EXPECT_EQ(EngineFingerprint("cpu").size(), 12u);
  EXPECT_NE(EngineFingerprint("cpu"), EngineFingerprint("cuda:0"));

  json j = CalibrationToJson(c);
  j["engine"]["colour"] = "red";
  EXPECT_THROW(CalibrationFromJson(j, "c.json"), EstimateError);
  j = CalibrationToJson(c);
  j["engine"].erase("fingerprint");
  EXPECT_THROW(CalibrationFromJson(j, "c.json"), EstimateError);
}

// Another fingerprint (the list of timed files changed) with each file's hash the same as
// this build's: this engine. One timed file of another hash, or one the calibration never
// saw: stale, naming it. A GPU calibration's list is the GPU engine's and the host's part of
// its step, not the CPU layers.
TEST(CalibrationTest, StaleOnlyWhereATimedFileDiffers) {
  const EngineSourceHashes& mine = EngineSources("cpu");
  ASSERT_GT(mine.size(), 50u);
  EXPECT_TRUE(mine.count("launcher/nn/network.cpp") && mine.count("build-flags"));
  EXPECT_TRUE(mine.count("launcher/train/trainer_step.cpp"));
  EXPECT_FALSE(mine.count("launcher/train/trainer_observe.cpp"));  // after the last step
  const EngineSourceHashes& gpu = EngineSources("cuda:0");
  EXPECT_TRUE(gpu.count("launcher/engine/cuda/cuda_engine.hpp") && gpu.count("build-flags"));
  EXPECT_TRUE(gpu.count("launcher/train/trainer_step.cpp"));
  EXPECT_TRUE(gpu.count("launcher/comm/control_reduce.cpp"));
  EXPECT_FALSE(gpu.count("launcher/nn/network.cpp"));                 // the CPU layers
  EXPECT_FALSE(gpu.count("launcher/engine/cuda/cuda_pipeline.cpp"));  // never calibrated
  EXPECT_FALSE(gpu.count("launcher/train/trainer_observe.cpp"));
  Calibration c = Example();
  c.engine = "000000000000";
  c.engine_sources = mine;
  c.engine_sources["launcher/train/trainer_observe.cpp"] = "0123456789ab";  // not timed
  EXPECT_EQ(CalibrationStaleness(c), "");
  const Calibration back = CalibrationFromJson(json::parse(CalibrationToJson(c).dump()), "c.json");
  EXPECT_EQ(back.engine_sources, c.engine_sources);
  EXPECT_EQ(CalibrationStaleness(back), "");
  c.engine_sources["launcher/nn/network.cpp"] = "0123456789ab";
  EXPECT_EQ(CalibrationStaleness(c),
            "measured with engine 000000000000 (launcher/nn/network.cpp differs), this build's "
            "engine is " +
                EngineFingerprint("cpu") + ": recalibrate (dlh-estimate calibrate)");
  c.engine_sources.erase("build-flags");
  EXPECT_NE(CalibrationStaleness(c).find("(build-flags, launcher/nn/network.cpp differ)"),
            std::string::npos);
  c.engine = EngineFingerprint("cpu");  // the same fingerprint: the list is not consulted
  EXPECT_EQ(CalibrationStaleness(c), "");
  c.device = "cuda";
  c.engine = "000000000000";
  c.engine_sources = mine;
  EXPECT_NE(CalibrationStaleness(c), "");

  json j = CalibrationToJson(back);
  j["engine"]["sources"]["launcher/nn/network.cpp"] = 7;
  EXPECT_EQ(EstimateErrorOf([&] { CalibrationFromJson(j, "c.json"); }),
            "c.json: engine.sources.launcher/nn/network.cpp: must be the file's hash, a non-empty "
            "string, got 7");
  j["engine"]["sources"] = json::array();
  EXPECT_EQ(EstimateErrorOf([&] { CalibrationFromJson(j, "c.json"); }),
            "c.json: engine.sources: must be an object of file paths and their hashes, got an "
            "empty array");
}

// A GPU calibration's stored layer model (gpu-layers --store) survives the file, and a
// damaged one is refused naming the field.
TEST(CalibrationTest, GpuLayerModelRoundTripsAndIsChecked) {
  Calibration c = Example();
  c.gpu_layer_model.present = true;
  c.gpu_layer_model.params.tf32_efficiency = 0.57;
  c.gpu_layer_model.params.overlap = false;
  c.gpu_layer_model.peaks = GpuPeaks{"h100", 66.9, 494.7, 3350, 132};
  c.gpu_layer_model.samples = 96;
  c.gpu_layer_model.mape = 8.9;
  c.gpu_layer_model.cv_mape = 9.9;
  c.gpu_layer_model.validation_mape = 19.4;
  c.gpu_layer_model.validation_models = 10;
  c.gpu_layer_model.fitted_to = "the calibration's sweep";
  const json good = CalibrationToJson(c);
  const Calibration back = CalibrationFromJson(good, "cal.json");
  ASSERT_TRUE(back.gpu_layer_model.present);
  EXPECT_DOUBLE_EQ(back.gpu_layer_model.params.tf32_efficiency, 0.57);
  EXPECT_FALSE(back.gpu_layer_model.params.overlap);
  EXPECT_EQ(back.gpu_layer_model.peaks.sms, 132);
  EXPECT_DOUBLE_EQ(back.gpu_layer_model.validation_mape, 19.4);
  EXPECT_FALSE(
      CalibrationFromJson(CalibrationToJson(Example()), "cal.json").gpu_layer_model.present);
  auto message = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    try {
      CalibrationFromJson(j, "cal.json");
    } catch (const EstimateError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([](json& j) { j["gpu_layer_model"]["params"]["tf32_efficiency"] = 1.5; }),
            "cal.json: gpu_layer_model.params.tf32_efficiency: must be at most 1, got 1.5");
  EXPECT_EQ(message([](json& j) { j["gpu_layer_model"]["params"].erase("step_s"); }),
            "cal.json: gpu_layer_model.params.step_s: required");
  EXPECT_EQ(message([](json& j) { j["gpu_layer_model"]["peaks"]["sms"] = 0; }),
            "cal.json: gpu_layer_model.peaks.sms: must be a positive integer, got 0");
  EXPECT_EQ(message([](json& j) { j["gpu_layer_model"]["overlap"] = "no"; }),
            "cal.json: gpu_layer_model.overlap: must be true or false, got \"no\"");
}

TEST(CalibrationTest, BadInputs) {
  const json good = CalibrationToJson(Example());
  ASSERT_NO_THROW(CalibrationFromJson(good, "cal.json"));
  struct Case {
    std::function<void(json&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j = json::array(); }, "cal.json: must be a JSON object, got an empty array"},
      {[](json& j) { j["format_version"] = 2; },
       "cal.json: format_version: unsupported version 2 (this build reads 1)"},
      {[](json& j) { j["format_version"] = "1"; },
       "cal.json: format_version: must be an integer, got \"1\""},
      {[](json& j) { j.erase("format_version"); }, "cal.json: format_version: required"},
      {[](json& j) { j.erase("device"); }, "cal.json: device: required"},
      {[](json& j) { j["device"] = ""; }, "cal.json: device: must be a non-empty string, got \"\""},
      {[](json& j) { j["threads"] = "two"; },
       "cal.json: threads: must be a non-negative integer, got \"two\""},
      {[](json& j) { j["extra"] = true; }, "cal.json: unknown key \"extra\""},
      {[](json& j) { j["samples"] = json::object(); },
       "cal.json: samples: must be an array, got an empty object"},
      {[](json& j) { j["samples"][3]["seconds"] = -1; },
       "cal.json: samples[3].seconds: must be a positive number, got -1"},
      {[](json& j) { j["samples"][0]["batch"] = 2.5; },
       "cal.json: samples[0].batch: must be a positive integer, got 2.5"},
      {[](json& j) { j["samples"][1]["joules"] = "n/a"; },
       "cal.json: samples[1].joules: must be null or a non-negative number, got \"n/a\""},
      {[](json& j) { j["samples"][2].erase("joules"); }, "cal.json: samples[2].joules: required"},
      {[](json& j) { j["samples"][0]["features"].erase("params"); },
       "cal.json: samples[0].features.params: required"},
      {[](json& j) { j["samples"][0]["features"]["conv_layers"] = -1; },
       "cal.json: samples[0].features.conv_layers: must be a non-negative integer, got -1"},
      {[](json& j) { j["samples"][5]["features"]["layers"] = json::array(); },
       "cal.json: samples[5].features: unknown key \"layers\""},
      {[](json& j) {
         j["model"]["coef"] = {1, 2, 3, 4};
       },
       "cal.json: model.coef: must be an array of 11 non-negative numbers (one per term), got an "
       "array of 4 items"},
      {[](json& j) { j["model"]["coef"][2] = -1e-9; },
       "cal.json: model.coef[2]: must be a non-negative number, got -1e-09"},
      {[](json& j) { j["model"]["terms"][0] = "fixed_s"; },
       "cal.json: model.terms[0]: must be \"overhead_s\", got \"fixed_s\""},
      {[](json& j) { j["model"]["quality"]["mape"] = -1; },
       "cal.json: model.quality.mape: must be a non-negative number, got -1"},
      {[](json& j) { j["model"].erase("quality"); }, "cal.json: model.quality: required"},
      {[](json& j) { j["model"] = nullptr; }, "cal.json: model: must be a JSON object, got null"},
  };
  for (const Case& c : cases) {
    json j = good;
    c.edit(j);
    EXPECT_EQ(EstimateErrorOf([&] { CalibrationFromJson(j, "cal.json"); }), c.message);
  }
}

class CalibrationFileTest : public ::testing::Test {
 protected:
  test::TempDir tmp_{"dlh-time-model-test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(CalibrationFileTest, SaveAndLoad) {
  const Calibration c = Example();
  const std::string path = dir_ + "/cpu.json";
  SaveCalibration(path, c);
  ExpectSame(c, LoadCalibration(path));
  // Overwrite in place; no temporary file is left behind.
  Calibration d = c;
  d.threads = 1;
  SaveCalibration(path, d);
  EXPECT_EQ(LoadCalibration(path).threads, 1);
  EXPECT_EQ(tmp_.Entries(), std::vector<std::string>{"cpu.json"});
}

TEST_F(CalibrationFileTest, LoadErrors) {
  const std::string missing = dir_ + "/missing.json";
  EXPECT_EQ(EstimateErrorOf([&] { LoadCalibration(missing); }),
            missing + ": cannot read: No such file or directory");

  const std::string bad = dir_ + "/bad.json";
  std::ofstream(bad) << "{\"format_version\": 1,";
  const std::string msg = EstimateErrorOf([&] { LoadCalibration(bad); });
  EXPECT_TRUE(StartsWith(msg, bad + ": not valid JSON: parse error at line 1, column 22")) << msg;

  const std::string wrong = dir_ + "/wrong.json";
  std::ofstream(wrong) << "{\"format_version\": 1}\n";
  EXPECT_EQ(EstimateErrorOf([&] { LoadCalibration(wrong); }), wrong + ": device: required");

  EXPECT_EQ(EstimateErrorOf([&] { LoadCalibration(dir_); }),
            dir_ + ": cannot read: Is a directory");
}

TEST_F(CalibrationFileTest, SaveErrors) {
  const std::string path = dir_ + "/no/such/folder/cpu.json";
  EXPECT_EQ(EstimateErrorOf([&] { SaveCalibration(path, Example()); }),
            path + ": cannot write: No such file or directory");
}

}  // namespace
}  // namespace dlh
