// DLH — the loss and optimizer kernels against the CPU engine's implementations.
#include <algorithm>
#include <cstring>

#include "launcher/nn/optimizer.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
namespace {

TEST(GpuKernels, SoftmaxCrossEntropyMatchesCpu) {
  DLH_REQUIRE_GPU();
  const int n = 300, classes = 10;  // more samples than the kernel's threads
  Tensor logits({n, classes});
  logits.assign(RandomNormal(size_t(n) * classes, 5));
  for (float& z : logits) z *= 4;
  std::vector<int32_t> labels(n);
  for (int b = 0; b < n; ++b) labels[size_t(b)] = (b * 7) % classes;
  Tensor grad;
  int64_t correct = 0;
  const double loss = SoftmaxCrossEntropy(logits, labels.data(), 0.25f, &grad, &correct);

  TestGpu gpu(n);
  DeviceArray<float> dz = Upload(logits.to_vector()), dg = Poisoned(logits.size());
  DeviceArray<int32_t> dl{size_t(n)};
  CUDA_CHECK(cudaMemcpy(dl.get(), labels.data(), labels.size() * 4, cudaMemcpyHostToDevice));
  DeviceArray<double> sums(2);
  DeviceArray<int> bad(1);
  CUDA_CHECK(cudaMemset(bad.get(), 0, sizeof(int)));
  SoftmaxCrossEntropy(dz.get(), dl.get(), n, classes, 0.25f, dg.get(), sums.get(), bad.get(),
                      gpu.stream.get());
  gpu.sync();
  double host_sums[2];
  int host_bad = -1;
  CUDA_CHECK(cudaMemcpy(host_sums, sums.get(), sizeof host_sums, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&host_bad, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_NEAR(host_sums[0], loss, 1e-9 * std::abs(loss));
  EXPECT_EQ(int64_t(host_sums[1]), correct);
  EXPECT_EQ(host_bad, 0);
  EXPECT_TRUE(Near(Download(dg.get(), grad.size()), grad.to_vector(), 1e-6));

  labels[17] = classes;  // out of range: reported, not read out of bounds
  CUDA_CHECK(cudaMemcpy(dl.get(), labels.data(), labels.size() * 4, cudaMemcpyHostToDevice));
  SoftmaxCrossEntropy(dz.get(), dl.get(), n, classes, 1.0f, nullptr, sums.get(), bad.get(),
                      gpu.stream.get());
  gpu.sync();
  CUDA_CHECK(cudaMemcpy(&host_bad, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host_bad, 18);
}

// Label smoothing against the CPU loss: training (with the gradient) and evaluation
// (without), at two strengths; s = 0 passed explicitly is the unsmoothed kernel bit for bit.
TEST(GpuKernels, SoftmaxCrossEntropyWithLabelSmoothingMatchesCpu) {
  DLH_REQUIRE_GPU();
  const int n = 300, classes = 7;
  Tensor logits({n, classes});
  logits.assign(RandomNormal(size_t(n) * classes, 6));
  for (float& z : logits) z *= 3;
  std::vector<int32_t> labels(n);
  for (int b = 0; b < n; ++b) labels[size_t(b)] = (b * 5) % classes;

  TestGpu gpu(n);
  DeviceArray<float> dz = Upload(logits.to_vector());
  DeviceArray<int32_t> dl{size_t(n)};
  CUDA_CHECK(cudaMemcpy(dl.get(), labels.data(), labels.size() * 4, cudaMemcpyHostToDevice));
  DeviceArray<double> sums(2);
  DeviceArray<int> bad(1);
  // The GPU loss and hits for smoothing s; the gradient into `grad` unless it is null.
  auto run = [&](double s, float* grad, bool pass_smoothing = true) {
    CUDA_CHECK(cudaMemset(bad.get(), 0, sizeof(int)));
    if (pass_smoothing)
      SoftmaxCrossEntropy(dz.get(), dl.get(), n, classes, 0.25f, grad, sums.get(), bad.get(),
                          gpu.stream.get(), s);
    else
      SoftmaxCrossEntropy(dz.get(), dl.get(), n, classes, 0.25f, grad, sums.get(), bad.get(),
                          gpu.stream.get());
    gpu.sync();
    std::vector<double> host(2);
    int host_bad = -1;
    CUDA_CHECK(cudaMemcpy(host.data(), sums.get(), 2 * sizeof(double), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&host_bad, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ(host_bad, 0);
    return host;
  };

  for (double s : {0.1, 0.35}) {
    SCOPED_TRACE("label_smoothing " + std::to_string(s));
    Tensor grad;
    int64_t correct = 0;
    const double loss = SoftmaxCrossEntropy(logits, labels.data(), 0.25f, &grad, &correct, s);
    DeviceArray<float> dg = Poisoned(logits.size());
    std::vector<double> got = run(s, dg.get());
    EXPECT_NEAR(got[0], loss, 1e-9 * std::abs(loss));
    EXPECT_EQ(int64_t(got[1]), correct);
    EXPECT_TRUE(Near(Download(dg.get(), grad.size()), grad.to_vector(), 1e-6));
    got = run(s, nullptr);  // evaluation: the same sums without a gradient
    EXPECT_NEAR(got[0], loss, 1e-9 * std::abs(loss));
    EXPECT_EQ(int64_t(got[1]), correct);
  }

  DeviceArray<float> plain = Poisoned(logits.size()), zero = Poisoned(logits.size());
  const std::vector<double> a = run(0.0, plain.get(), false), b = run(0.0, zero.get());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), 2 * sizeof(double)));
  const std::vector<float> ga = Download(plain.get(), logits.size()),
                           gb = Download(zero.get(), logits.size());
  EXPECT_EQ(0, std::memcmp(ga.data(), gb.data(), ga.size() * sizeof(float)));
}

// Three steps of the CPU optimizer and of the kernels from the same start. The device
// side is the engine's: a weight (decays) and a bias (does not) at kParamAlign-aligned
// offsets of flat arrays with a gap between them, updated by one launch.
void CompareOptimizer(const OptimizerSpec& spec) {
  SCOPED_TRACE(std::string(spec.kind == OptimizerSpec::Kind::Adam ? "adam" : "sgd") + " momentum " +
               std::to_string(spec.momentum) + (spec.nesterov ? " nesterov" : ""));
  const size_t nw = 1000, nb = 10;
  const size_t bias_at = (nw + kParamAlign - 1) / kParamAlign * kParamAlign;
  const size_t total = bias_at + kParamAlign;
  Tensor w({int(nw)}), gw({int(nw)}), b({int(nb)}), gb({int(nb)});
  w.assign(RandomNormal(nw, 8));
  b.assign(RandomNormal(nb, 9));
  std::vector<NamedParam> params = {{"00.dense/weight", ParamRef{"weight", &w, &gw, true}},
                                    {"00.dense/bias", ParamRef{"bias", &b, &gb, false}}};
  std::unique_ptr<Optimizer> cpu = MakeOptimizer(spec);
  TestGpu gpu(1);
  // Flat host images of the device arrays; gaps hold zeros, as in the engine.
  auto flat = [&](const std::vector<float>& weight, const std::vector<float>& bias) {
    std::vector<float> all(total, 0.0f);
    std::copy(weight.begin(), weight.end(), all.begin());
    std::copy(bias.begin(), bias.end(), all.begin() + long(bias_at));
    return all;
  };
  std::vector<uint8_t> decays(total / kParamAlign, 0);
  std::fill(decays.begin(), decays.begin() + long(bias_at / kParamAlign), uint8_t(1));
  DeviceArray<uint8_t> dd(decays.size());
  CUDA_CHECK(cudaMemcpy(dd.get(), decays.data(), decays.size(), cudaMemcpyHostToDevice));
  DeviceArray<float> dw = Upload(flat(w.to_vector(), b.to_vector())), dg(total),
                     a = Upload(std::vector<float>(total, 0)),
                     s = Upload(std::vector<float>(total, 0));
  const double lr = 0.05;
  for (int step = 0; step < 3; ++step) {
    gw.assign(RandomNormal(nw, 20 + step));
    gb.assign(RandomNormal(nb, 40 + step));
    const std::vector<float> g = flat(gw.to_vector(), gb.to_vector());
    CUDA_CHECK(cudaMemcpy(dg.get(), g.data(), total * 4, cudaMemcpyHostToDevice));
    cpu->update(params, lr, step);
    const float wd = float(spec.weight_decay);
    if (spec.kind == OptimizerSpec::Kind::Adam) {
      const float c1 = float(1.0 / (1.0 - std::pow(spec.beta1, step + 1)));
      const float c2 = float(1.0 / (1.0 - std::pow(spec.beta2, step + 1)));
      AdamUpdate(dw.get(), dg.get(), a.get(), s.get(), dd.get(), total, float(lr),
                 float(spec.beta1), float(spec.beta2), c1, c2, float(spec.epsilon), float(lr) * wd,
                 gpu.stream.get());
    } else {
      SgdUpdate(dw.get(), dg.get(), spec.momentum != 0 ? a.get() : nullptr, dd.get(), total,
                float(lr), float(spec.momentum), wd, spec.nesterov, gpu.stream.get());
    }
  }
  const std::vector<float> got = Download(dw.get(), total);
  EXPECT_TRUE(Near(std::vector<float>(got.begin(), got.begin() + long(nw)), w.to_vector(), 1e-6))
      << "weight";
  EXPECT_TRUE(
      Near(std::vector<float>(got.begin() + long(bias_at), got.begin() + long(bias_at + nb)),
           b.to_vector(), 1e-6))
      << "bias (no decay)";
  for (size_t i = 0; i < total; ++i) {
    if (i >= bias_at + nb || (i >= nw && i < bias_at)) {
      ASSERT_EQ(got[i], 0.0f) << "alignment gap at " << i;
    }
  }
}

TEST(GpuKernels, OptimizersMatchCpu) {
  DLH_REQUIRE_GPU();
  OptimizerSpec sgd;
  sgd.weight_decay = 1e-3;
  CompareOptimizer(sgd);
  sgd.momentum = 0.9;
  CompareOptimizer(sgd);
  sgd.nesterov = true;
  CompareOptimizer(sgd);
  OptimizerSpec adam;
  adam.kind = OptimizerSpec::Kind::Adam;
  adam.weight_decay = 1e-2;
  CompareOptimizer(adam);
}

// The batchnorm reductions add partial sums in a fixed order: two runs on the same input
// give the same bits (DLH's resume promise), here on a shape with several parts per
// channel.
TEST(GpuKernels, BatchNormStatisticsRepeatBitForBit) {
  DLH_REQUIRE_GPU();
  const int n = 64, c = 3, hw = 17 * 17;
  const size_t count = size_t(n) * c * hw;
  TestGpu gpu(1);
  DeviceArray<float> x = Upload(RandomNormal(count, 4)), y(count), xhat(count), inv_std(c);
  DeviceArray<float> gamma = Upload(std::vector<float>(c, 1.0f)),
                     beta = Upload(std::vector<float>(c, 0.0f));
  DeviceArray<double> scratch(BatchNormScratchSize(c));
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    DeviceArray<float> stats = Poisoned(2 * c);
    BatchNormTrainForward(x.get(), y.get(), xhat.get(), stats.get(), inv_std.get(), gamma.get(),
                          beta.get(), scratch.get(), n, c, hw, 1e-5, gpu.stream.get());
    const std::vector<float> got = Download(stats.get(), 2 * c);
    if (run == 0)
      first = got;
    else
      EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)));
  }
}

}  // namespace
}  // namespace cuda
}  // namespace dlh
