// DLH — the loss and optimizer kernels against the CPU engine's implementations.
#include "launcher/nn/optimizer.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace dlh {
namespace cuda {
namespace {

TEST(GpuKernels, SoftmaxCrossEntropyMatchesCpu) {
  DLH_REQUIRE_GPU();
  const int n = 300, classes = 10;  // more samples than the kernel's threads
  Tensor logits({n, classes});
  logits.values() = RandomNormal(size_t(n) * classes, 5);
  for (float& z : logits.values()) z *= 4;
  std::vector<int32_t> labels(n);
  for (int b = 0; b < n; ++b) labels[size_t(b)] = (b * 7) % classes;
  Tensor grad;
  int64_t correct = 0;
  const double loss = SoftmaxCrossEntropy(logits, labels.data(), 0.25f, &grad, &correct);

  TestGpu gpu(n);
  DeviceArray<float> dz = Upload(logits.values()), dg = Poisoned(logits.size());
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
  EXPECT_TRUE(Near(Download(dg.get(), grad.size()), grad.values(), 1e-6));

  labels[17] = classes;  // out of range: reported, not read out of bounds
  CUDA_CHECK(cudaMemcpy(dl.get(), labels.data(), labels.size() * 4, cudaMemcpyHostToDevice));
  SoftmaxCrossEntropy(dz.get(), dl.get(), n, classes, 1.0f, nullptr, sums.get(), bad.get(),
                      gpu.stream.get());
  gpu.sync();
  CUDA_CHECK(cudaMemcpy(&host_bad, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host_bad, 18);
}

// Three steps of the CPU optimizer and of the kernels from the same start.
void CompareOptimizer(const OptimizerSpec& spec) {
  const size_t n = 1000;
  Tensor w({int(n)}), g({int(n)});
  w.values() = RandomNormal(n, 8);
  std::vector<NamedParam> params = {{"00.dense/weight", ParamRef{"weight", &w, &g, true}}};
  std::unique_ptr<Optimizer> cpu = MakeOptimizer(spec);
  TestGpu gpu(1);
  DeviceArray<float> dw = Upload(w.values()), dg(n), a = Upload(std::vector<float>(n, 0)),
                     b = Upload(std::vector<float>(n, 0));
  const double lr = 0.05;
  for (int step = 0; step < 3; ++step) {
    g.values() = RandomNormal(n, 20 + step);
    CUDA_CHECK(cudaMemcpy(dg.get(), g.data(), n * 4, cudaMemcpyHostToDevice));
    cpu->update(params, lr, step);
    const float wd = float(spec.weight_decay);
    if (spec.kind == OptimizerSpec::Kind::Adam) {
      const float c1 = float(1.0 / (1.0 - std::pow(spec.beta1, step + 1)));
      const float c2 = float(1.0 / (1.0 - std::pow(spec.beta2, step + 1)));
      AdamUpdate(dw.get(), dg.get(), a.get(), b.get(), n, float(lr), float(spec.beta1),
                 float(spec.beta2), c1, c2, float(spec.epsilon), float(lr) * wd, gpu.stream.get());
    } else {
      SgdUpdate(dw.get(), dg.get(), spec.momentum != 0 ? a.get() : nullptr, n, float(lr),
                float(spec.momentum), wd, spec.nesterov, gpu.stream.get());
    }
  }
  EXPECT_TRUE(Near(Download(dw.get(), n), w.values(), 1e-6));
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

}  // namespace
}  // namespace cuda
}  // namespace dlh
