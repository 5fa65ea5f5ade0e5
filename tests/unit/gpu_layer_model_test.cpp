// Tests of the GPU layer model (estimator/model/gpu_layer_model.hpp): wave quantisation,
// the roofline's max, the fit recovering known parameters, and transfer by peaks.
#include "estimator/model/gpu_layer_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/features.hpp"

namespace dlh {
namespace {

GpuPeaks H100() { return GpuPeaks{"h100", 66.9, 494.7, 3350, 132}; }

// A GEMM of full 128 x 128 tiles: a whole number of waves runs at the rate; one more tile's
// worth of columns past a full wave costs most of another wave (smaller tiles, each slower,
// are the best the heuristic finds), though the work grew by under 1%.
TEST(GpuLayerModel, WaveQuantisationSteps) {
  const int sms = 132;
  const double rate = 1e12, k = 512;
  const double one = GemmComputeSeconds(128, 128 * sms, k, sms, rate);
  EXPECT_EQ(TileGemm(128, 128 * sms, k, sms).waves, 1);
  EXPECT_NEAR(one, 2.0 * 128 * 128 * sms * k / rate, one * 1e-12);
  EXPECT_NEAR(GemmComputeSeconds(128, 128 * 2 * sms, k, sms, rate) / one, 2.0, 1e-9);
  EXPECT_EQ(TileGemm(128, 128 * 2 * sms, k, sms).waves, 2);
  const double past = GemmComputeSeconds(128, 128 * sms + 32, k, sms, rate);
  EXPECT_GT(past / one, 1.5);
  EXPECT_GT(GemmComputeSeconds(128, 128 * 2 * sms + 32, k, sms, rate) / one, 2.5);
  // Adding columns within a wave's padding costs nothing more.
  EXPECT_EQ(GemmComputeSeconds(128, 128 * sms - 64, k, sms, rate), one);
  EXPECT_THROW(GemmComputeSeconds(1, 1, 1, 0, rate), EstimateError);
}

TEST(GpuLayerModel, SmallGemmsUseSmallTilesOrSplitK) {
  // 64 x 64 output, k = 1e6 (a weight gradient over a large batch): split along k.
  const GemmTiling t = TileGemm(64, 64, 1e6, 132);
  EXPECT_GT(t.split, 1);
  EXPECT_LE(t.tiles * t.split, 132);
  // Far faster than one tile running all of k on one SM.
  EXPECT_LT(GemmComputeSeconds(64, 64, 1e6, 132, 1e12), 0.1 * (2 * 64 * 64 * 1e6 / (1e12 / 132)));
}

TEST(GpuLayerModel, KernelTimeIsTheRooflineMax) {
  GpuLayerParams p;
  p.kernel_floor_s = 1e-6;
  p.memory_efficiency = 0.5;
  p.fp32_efficiency = 0.5;
  const GpuPeaks gpu = H100();
  GpuKernel memory_bound;
  memory_bound.bytes = 1e9;
  EXPECT_NEAR(KernelDeviceSeconds(memory_bound, gpu, p), 1e9 / (3350e9 * 0.5), 1e-12);
  GpuKernel compute_bound;
  compute_bound.gemm = true;
  compute_bound.m = compute_bound.n = 128 * 132 * 4;
  compute_bound.k = 4096;
  compute_bound.flops = 2 * compute_bound.m * compute_bound.n * compute_bound.k;
  compute_bound.bytes = 1e3;
  const double compute =
      GemmComputeSeconds(compute_bound.m, compute_bound.n, compute_bound.k, gpu.sms, 0.5 * 66.9e12);
  EXPECT_NEAR(KernelDeviceSeconds(compute_bound, gpu, p), compute, compute * 1e-12);
  compute_bound.bytes = 1e13;  // now memory dominates
  EXPECT_NEAR(KernelDeviceSeconds(compute_bound, gpu, p), 1e13 / (3350e9 * 0.5), 1e-9);
  GpuKernel tiny;
  tiny.bytes = 8;
  EXPECT_EQ(KernelDeviceSeconds(tiny, gpu, p), p.kernel_floor_s);
}

TEST(GpuLayerModel, StepIsMaxOfHostAndDeviceWhenOverlapped) {
  GpuLayerParams p;
  p.step_s = 1e-5;
  p.kernel_floor_s = 1e-6;
  p.host_kernel_s = 1e-3;  // host-bound: the device waits for every kernel
  const ModelFeatures f = ComputeFeatures(GpuValidationModels().front().spec);
  const GpuStepTime host_bound = PredictGpuStep(f, 64, H100(), p);
  // Past the host's time only by the device time of backward's last kernel and the update's.
  EXPECT_NEAR(host_bound.seconds, host_bound.host_s + p.step_s, 1e-5);
  EXPECT_GT(host_bound.seconds, host_bound.host_s + p.step_s);
  p.host_kernel_s = 1e-9;
  p.host_conv_call_s = 0;
  p.kernel_floor_s = 1e-3;  // device-bound
  const GpuStepTime device_bound = PredictGpuStep(f, 64, H100(), p);
  EXPECT_NEAR(device_bound.seconds, device_bound.device_s + p.step_s, 1e-6);
  p.overlap = false;
  const GpuStepTime series = PredictGpuStep(f, 64, H100(), p);
  EXPECT_NEAR(series.seconds, series.host_s + series.device_s + p.step_s, 1e-12);
}

TEST(GpuLayerModel, KernelsFollowTheEngine) {
  // LeNet-5: 2 conv (the first without input gradient), 3 dense, 4 relu, 2 pools, flatten.
  const TrainSpec spec = GpuValidationModels().front().spec;
  ASSERT_EQ(spec.name, "val-lenet5-in32c1-b64");
  const std::vector<GpuKernel> k = GpuStepKernels(ComputeFeatures(spec), 64);
  int conv_calls = 0, updates = 0;
  for (const GpuKernel& g : k) {
    conv_calls += g.conv_call;
    updates += g.pass == GpuPass::Update;
    if (g.layer == 0) {
      EXPECT_NE(g.pass, GpuPass::BackwardData) << g.what;
    }
  }
  EXPECT_EQ(conv_calls, 2 + 2 + 1);  // forward twice, filter twice, data once
  EXPECT_EQ(updates, 1);
  EXPECT_EQ(k.back().pass, GpuPass::Update);
  EXPECT_THROW(GpuStepKernels(ModelFeatures{}, 1), EstimateError);
}

// Samples made by known parameters on the GPU sweep's models: the fit finds parameters that
// predict them (nearly) exactly, and the efficiencies that set most of the time.
TEST(GpuLayerModel, FitRecoversKnownParameters) {
  GpuLayerParams truth;
  truth.tf32_efficiency = 0.4;
  truth.fp32_efficiency = 0.7;
  truth.memory_efficiency = 0.6;
  truth.conv_memory_efficiency = 0.3;
  truth.narrow_exponent = 0.7;
  truth.host_kernel_s = 6e-6;
  truth.host_conv_call_s = 4e-5;
  truth.kernel_floor_s = 4e-6;
  truth.step_s = 1e-4;
  truth.overlap = false;
  std::vector<TimingSample> samples;
  const std::vector<SweepEntry> sweep = GpuCalibrationSweep(false);
  for (size_t i = 0; i < sweep.size(); i += 3) {  // a third of it keeps the test short
    const SweepEntry& e = sweep[i];
    TimingSample s;
    s.model = e.spec.name;
    s.batch = e.batch;
    s.features = ComputeFeatures(e.spec);
    s.seconds = PredictGpuStep(s.features, s.batch, H100(), truth).seconds;
    samples.push_back(s);
  }
  const GpuLayerFit fit = FitGpuLayerModel(samples, H100(), 0);
  EXPECT_LT(fit.mape, 1.0);
  EXPECT_FALSE(fit.params.overlap);
  EXPECT_NEAR(fit.params.memory_efficiency, truth.memory_efficiency, 0.05);
  EXPECT_NEAR(fit.params.conv_memory_efficiency, truth.conv_memory_efficiency, 0.05);
  EXPECT_NEAR(fit.params.host_conv_call_s, truth.host_conv_call_s, 1e-5);
  samples.resize(10);
  EXPECT_THROW(FitGpuLayerModel(samples, H100(), 0), EstimateError);
}

// Profiles made by known parameters (each pass's device time the sum of its kernels', its
// host time theirs plus a marking cost per pass): the fit to passes finds the host terms and
// the marking, the device terms that set the time, the step's synchronisation and its form.
TEST(GpuLayerModel, FitToPassesRecoversKnownParameters) {
  GpuLayerParams truth;
  truth.tf32_efficiency = 0.45;
  truth.fp32_efficiency = 0.65;
  truth.memory_efficiency = 0.6;
  truth.conv_memory_efficiency = 0.25;
  truth.narrow_exponent = 0.6;
  truth.host_kernel_s = 7e-6;
  truth.host_conv_call_s = 5e-5;
  truth.kernel_floor_s = 3e-6;
  truth.step_s = 1.2e-4;
  truth.overlap = true;
  const double marking = 2e-6;
  std::vector<GpuPassSample> samples;
  const std::vector<SweepEntry> sweep = GpuCalibrationSweep(false);
  for (size_t i = 0; i < sweep.size(); i += 4) {
    const SweepEntry& e = sweep[i];
    GpuPassSample s;
    s.model = e.spec.name;
    s.batch = e.batch;
    s.features = ComputeFeatures(e.spec);
    const std::vector<GpuKernel> kernels = GpuStepKernels(s.features, s.batch);
    s.step_s = PredictGpuStep(kernels, H100(), truth).seconds;
    std::map<std::pair<int, std::string>, size_t> at;  // the passes, in the order they ran
    for (const GpuKernel& k : kernels) {
      const std::string pass = GpuProfilePass(k, s.features.layers);
      if (pass.empty()) continue;
      auto [it, added] = at.emplace(std::make_pair(k.layer, pass), s.passes.size());
      if (added) {
        LayerPassTime t;
        t.layer = k.layer;
        t.pass = pass;
        t.host_s = marking;
        s.passes.push_back(t);
      }
      s.passes[it->second].device_s += KernelDeviceSeconds(k, H100(), truth);
      s.passes[it->second].host_s += KernelHostSeconds(k, truth);
    }
    samples.push_back(s);
  }
  const GpuPassFit fit = FitGpuLayerModelToPasses(samples, H100());
  EXPECT_LT(fit.device_mape, 2.0);
  EXPECT_LT(fit.host_mape, 0.1);
  EXPECT_LT(fit.step_mape, 1.0);
  EXPECT_TRUE(fit.params.overlap);
  EXPECT_NEAR(fit.marking_s, marking, 1e-8);
  EXPECT_NEAR(fit.params.host_kernel_s, truth.host_kernel_s, 1e-8);
  EXPECT_NEAR(fit.params.host_conv_call_s, truth.host_conv_call_s, 1e-8);
  EXPECT_NEAR(fit.params.tf32_efficiency, truth.tf32_efficiency, 0.05);
  EXPECT_NEAR(fit.params.memory_efficiency, truth.memory_efficiency, 0.05);
  EXPECT_NEAR(fit.params.conv_memory_efficiency, truth.conv_memory_efficiency, 0.05);
  EXPECT_NEAR(fit.params.step_s, truth.step_s, 0.1 * truth.step_s);
  samples.resize(1);
  EXPECT_THROW(FitGpuLayerModelToPasses(samples, H100()), EstimateError);
}

// Every kernel of a step but a batchnorm's commit falls in a pass the engine marks.
TEST(GpuLayerModel, KernelsFallInTheEnginesPasses) {
  const SweepEntry e = GpuCalibrationSweep(false)[27];
  ASSERT_EQ(e.spec.name, "conv3-f128-fc1x1024-in64c3-b256-bn");
  const ModelFeatures f = ComputeFeatures(e.spec);
  std::map<std::string, int> passes;
  for (const GpuKernel& k : GpuStepKernels(f, e.batch)) ++passes[GpuProfilePass(k, f.layers)];
  EXPECT_EQ(passes.count("backward-weights") + passes.count("backward-data") +
                passes.count("forward") + passes.count("loss") + passes.count("update"),
            5u);
  EXPECT_EQ(passes[""], 3);  // its three batchnorms' commits, after the update
  for (const auto& [pass, n] : passes)
    EXPECT_TRUE(pass.empty() || pass == "forward" || pass == "backward" ||
                pass == "backward-weights" || pass == "backward-data" || pass == "loss" ||
                pass == "update")
        << pass;
}

// More of any peak never makes a step slower; more SMs at the same speed per SM neither.
TEST(GpuLayerModel, TransferIsMonotonicInPeaks) {
  const GpuLayerParams p;
  for (const SweepEntry& e : GpuValidationModels()) {
    const ModelFeatures f = ComputeFeatures(e.spec);
    const double base = PredictGpuStep(f, e.batch, H100(), p).seconds;
    for (double x : {1.5, 3.0}) {
      GpuPeaks g = H100();
      g.fp32_tflops *= x;
      EXPECT_LE(PredictGpuStep(f, e.batch, g, p).seconds, base * (1 + 1e-12)) << e.spec.name;
      g = H100();
      g.tf32_tflops *= x;
      EXPECT_LE(PredictGpuStep(f, e.batch, g, p).seconds, base * (1 + 1e-12)) << e.spec.name;
      g = H100();
      g.bandwidth_gbs *= x;
      EXPECT_LE(PredictGpuStep(f, e.batch, g, p).seconds, base * (1 + 1e-12)) << e.spec.name;
      g = H100();
      g.sms = int(g.sms * x);
      g.fp32_tflops *= double(g.sms) / H100().sms;
      g.tf32_tflops *= double(g.sms) / H100().sms;
      EXPECT_LE(PredictGpuStep(f, e.batch, g, p).seconds, base * (1 + 1e-12)) << e.spec.name;
    }
    GpuPeaks slow = H100();
    slow.fp32_tflops /= 4, slow.tf32_tflops /= 4, slow.bandwidth_gbs /= 4;
    EXPECT_GE(PredictGpuStep(f, e.batch, slow, p).seconds, base) << e.spec.name;
  }
  GpuPeaks bad = H100();
  bad.bandwidth_gbs = 0;
  EXPECT_THROW(CheckGpuPeaks(bad, "x"), EstimateError);
}

// The kinds the CUDA engine does not run yet are modelled, not refused: element-wise kernels,
// and a residual block as its paths' kernels plus the addition, all under the block's
// top-level index (the planner keeps such specs off GPUs: cuda_support_test.cpp).
TEST(GpuLayerModel, NewKindsAndResidualBlocks) {
  const TrainSpec spec = ParseSpec(R"({
    "name": "resnet-ish",
    "input": {"channels": 3, "height": 16, "width": 16},
    "classes": 10,
    "layers": [
      {"type": "residual",
       "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
                  {"type": "batchnorm"}, {"type": "gelu"}],
       "shortcut": [{"type": "conv2d", "filters": 8, "kernel": 1}]},
      {"type": "avgpool2d", "kernel": 2},
      {"type": "residual",
       "layers": [{"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1},
                  {"type": "batchnorm"}, {"type": "silu"}]},
      {"type": "globalavgpool2d"},
      {"type": "flatten"},
      {"type": "dense", "units": 10}
    ],
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9},
    "batch_size": 32, "epochs": 1, "label_smoothing": 0.1, "dataset": "d.h5"
  })",
                                   "resnet-ish.json", "");
  const ModelFeatures f = ComputeFeatures(spec);
  ASSERT_EQ(f.layers.size(), 6u);
  const std::vector<GpuKernel> k = GpuStepKernels(f, 32);
  std::map<std::string, int> count;
  for (const GpuKernel& g : k) {
    ++count[g.what];
    EXPECT_GE(g.layer, -1) << g.what;
    EXPECT_LT(g.layer, int(f.layers.size())) << g.what;
    EXPECT_TRUE(std::isfinite(g.bytes) && g.bytes >= 0) << g.what;
    // The first block's paths both start the network: their convolutions compute no input
    // gradient, nor does the block (its later layers do, for the convolutions' weights).
    if (g.layer == 0) {
      EXPECT_NE(g.what, "conv bwd-data");
      EXPECT_NE(g.what, "residual grad sum");
    }
  }
  EXPECT_EQ(count["residual add"], 2);
  EXPECT_EQ(count["residual grad sum"], 1);  // the second block's; the first is layer 0
  EXPECT_EQ(count["conv fwd"], 3);
  EXPECT_EQ(count["conv bwd-filter"], 3);
  EXPECT_EQ(count["conv bwd-data"], 1);  // the second block's conv
  EXPECT_EQ(count["gelu fwd"], 1);
  EXPECT_EQ(count["gelu bwd"], 1);  // second in its path
  EXPECT_EQ(count["silu bwd"], 1);
  EXPECT_EQ(count["avgpool fwd"], 1);
  EXPECT_EQ(count["avgpool bwd"], 1);
  EXPECT_EQ(count["globalavgpool fwd"], 1);
  EXPECT_EQ(count["batchnorm commit"], 2);  // nested batchnorms commit their statistics too
  const GpuStepTime t = PredictGpuStep(f, 32, H100(), GpuLayerParams{});
  EXPECT_TRUE(std::isfinite(t.seconds) && t.seconds > 0);
  EXPECT_EQ(t.kernels, int(k.size()));
}

}  // namespace
}  // namespace dlh
