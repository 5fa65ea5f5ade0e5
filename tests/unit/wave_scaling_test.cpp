// Tests of estimator/model/wave_scaling.cpp: which term scales with which peak, the arithmetic,
// and the choice of the reference calibration. DeviceSpeeds' use of it (sources, staleness)
// is tested in recommender_test.cpp.
#include "estimator/model/wave_scaling.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

GpuType Type(const std::string& name, double tflops, double gbs, const std::string& cal) {
  GpuType g;
  g.name = name;
  g.memory_gb = 16;
  g.peak_tflops = tflops;
  g.memory_bandwidth_gbs = gbs;
  g.active_watts = 300;
  g.calibration = cal;
  return g;
}

TEST(WaveScaling, OverheadKeptComputeByFlopsMemoryByBandwidth) {
  ASSERT_EQ(TimeTermNames().size(), size_t(kTimeTerms));
  EXPECT_EQ(TimeTermRate(0), TermRate::Fixed);    // overhead_s
  EXPECT_EQ(TimeTermRate(1), TermRate::Compute);  // conv s/FLOP
  EXPECT_EQ(TimeTermRate(2), TermRate::Compute);  // dense s/FLOP
  EXPECT_EQ(TimeTermRate(3), TermRate::Memory);   // element-wise
  EXPECT_EQ(TimeTermRate(4), TermRate::Memory);   // parameters
  EXPECT_EQ(TimeTermRate(5), TermRate::Memory);   // im2col
  EXPECT_EQ(TimeTermRate(6), TermRate::Compute);  // GEMM output tiles
  EXPECT_EQ(TimeTermRate(7), TermRate::Fixed);    // per conv layer
  EXPECT_EQ(TimeTermRate(8), TermRate::Fixed);    // per dense layer
  EXPECT_EQ(TimeTermRate(9), TermRate::Fixed);    // per sample and conv layer (GEMM calls)
  EXPECT_EQ(TimeTermRate(10), TermRate::Memory);  // per sample and conv weight
  // The layer model's own (layer_time_model.hpp): element-wise layers and their values.
  EXPECT_EQ(TimeTermRate(11), TermRate::Fixed);
  EXPECT_EQ(TimeTermRate(12), TermRate::Memory);
  EXPECT_THROW(TimeTermRate(kLayerTerms), EstimateError);
  EXPECT_THROW(TimeTermRate(-1), EstimateError);
}

TEST(WaveScaling, CoefficientsDivideByTheirRatio) {
  const std::vector<double> coef = {1e-3, 2e-11, 3e-11, 4e-9, 5e-9, 6e-9,
                                    7e-9, 8e-5,  9e-5,  1e-6, 2e-9};
  // The target has 2.5x the FLOP/s and 0.5x the bandwidth of the reference.
  const std::vector<double> s = ScaleCoefficients(coef, {2.5, 0.5});
  ASSERT_EQ(s.size(), coef.size());
  EXPECT_DOUBLE_EQ(s[0], 1e-3);
  EXPECT_DOUBLE_EQ(s[1], 2e-11 / 2.5);
  EXPECT_DOUBLE_EQ(s[2], 3e-11 / 2.5);
  EXPECT_DOUBLE_EQ(s[3], 4e-9 / 0.5);
  EXPECT_DOUBLE_EQ(s[4], 5e-9 / 0.5);
  EXPECT_DOUBLE_EQ(s[5], 6e-9 / 0.5);
  EXPECT_DOUBLE_EQ(s[6], 7e-9 / 2.5);
  EXPECT_DOUBLE_EQ(s[7], 8e-5);
  EXPECT_DOUBLE_EQ(s[8], 9e-5);
  EXPECT_DOUBLE_EQ(s[9], 1e-6);
  EXPECT_DOUBLE_EQ(s[10], 2e-9 / 0.5);
  EXPECT_EQ(ScaleCoefficients(coef, {1, 1}), coef);
}

TEST(WaveScaling, ScalingThereAndBackIsTheIdentity) {
  const std::vector<double> coef = {1e-3, 2e-11, 3e-11, 4e-9, 5e-9, 6e-9,
                                    7e-9, 8e-5,  9e-5,  1e-6, 2e-9};
  const std::vector<double> back =
      ScaleCoefficients(ScaleCoefficients(coef, {3, 0.25}), {1.0 / 3, 4});
  for (size_t i = 0; i < coef.size(); ++i) EXPECT_NEAR(back[i], coef[i], 1e-15 * coef[i]) << i;
}

TEST(WaveScaling, BadInputIsRefused) {
  const std::vector<double> coef(kTimeTerms, 1e-9);
  EXPECT_THROW(ScaleCoefficients({1, 2, 3}, {1, 1}), EstimateError);
  EXPECT_THROW(ScaleCoefficients(coef, {0, 1}), EstimateError);
  EXPECT_THROW(ScaleCoefficients(coef, {1, -2}), EstimateError);
  EXPECT_THROW(ScaleCoefficients(coef, {std::numeric_limits<double>::infinity(), 1}),
               EstimateError);
  EXPECT_THROW(ScaleCoefficients(coef, {std::nan(""), 1}), EstimateError);
}

TEST(WaveScaling, PeakRatioIsTargetOverReference) {
  const SpeedRatio r = PeakRatio(Type("alpha", 0.05, 10, "a.json"), Type("beta", 0.02, 5, ""));
  EXPECT_DOUBLE_EQ(r.flops, 0.4);
  EXPECT_DOUBLE_EQ(r.bandwidth, 0.5);
  EXPECT_EQ(RatioText(r), "FLOP/s x0.40, bandwidth x0.50");
}

TEST(WaveScaling, ReferenceIsTheClosestInLogPeaks) {
  Cluster c;
  // The target: 20 TFLOP/s, 2000 GB/s. "near" is 2x away in FLOP/s only (distance ln2^2);
  // "far" 1.5x in both (2 ln1.5^2 = 0.33 < ln2^2 = 0.48) is closer; "huge" is far off;
  // "none" is closest of all but has no calibration.
  c.gpu_types = {Type("near", 10, 2000, "near.json"), Type("far", 30, 3000, "far.json"),
                 Type("huge", 200, 20000, "huge.json"), Type("none", 20, 2000, ""),
                 Type("target", 20, 2000, "")};
  const GpuType* ref = ClosestCalibrated(c, c.gpu_types[4]);
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->name, "far");
  // Log distance, not linear: 2x slower (10) beats 1.6x faster (32 = 12 TFLOP/s further).
  c.gpu_types = {Type("slower", 10, 2000, "s.json"), Type("faster", 32, 2000, "f.json"),
                 Type("target", 20, 2000, "")};
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[2])->name, "faster");
  c.gpu_types[1].peak_tflops = 41;  // now 2.05x: the slower one is closer
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[2])->name, "slower");
}

TEST(WaveScaling, TiesGoToTheFirstNameWhateverTheOrder) {
  Cluster c;
  c.gpu_types = {Type("target", 20, 2000, ""), Type("zeta", 10, 1000, "z.json"),
                 Type("eta", 10, 1000, "e.json")};
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[0])->name, "eta");
  std::swap(c.gpu_types[1], c.gpu_types[2]);
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[0])->name, "eta");
}

TEST(WaveScaling, NoOtherCalibrationNoReference) {
  Cluster c;
  c.gpu_types = {Type("a", 10, 1000, ""), Type("b", 20, 2000, "")};
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[0]), nullptr);
  // A type is never its own reference (DeviceSpeeds uses its own calibration first).
  c.gpu_types[0].calibration = "a.json";
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[0]), nullptr);
  EXPECT_EQ(ClosestCalibrated(c, c.gpu_types[1])->name, "a");
}

}  // namespace
}  // namespace dlh
