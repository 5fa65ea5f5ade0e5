// DLH — unit tests of the engine's thread pool (launcher/nn/thread_pool.hpp) and of the promise
// it makes to the layers: results are bit-identical whatever the thread count.

#include "launcher/nn/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "launcher/nn/layer.hpp"
#include "launcher/nn/layers/gemm.hpp"
#include "launcher/nn/optimizer.hpp"

namespace dlh {
namespace {

// Restores the thread count a test changed, so that tests do not leak into each other.
class ThreadsGuard {
 public:
  ThreadsGuard() : saved_(CpuThreads()) {}
  ~ThreadsGuard() { SetCpuThreads(saved_); }

 private:
  int saved_;
};

TEST(Parallel, EveryBlockRunsOnceOnAValidThread) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    SetCpuThreads(threads);
    ASSERT_EQ(CpuThreads(), threads);
    for (int blocks : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> runs(size_t(blocks) + 1);
      std::atomic<bool> bad_thread{false};
      ParallelFor(blocks, [&](int b, int t) {
        runs[size_t(b)]++;
        if (t < 0 || t >= threads) bad_thread = true;
      });
      for (int b = 0; b < blocks; ++b) EXPECT_EQ(runs[size_t(b)], 1) << blocks << " blocks";
      EXPECT_FALSE(bad_thread);
    }
  }
}

TEST(Parallel, NestedCallsRunInlineOnTheirThread) {
  ThreadsGuard guard;
  SetCpuThreads(2);
  std::atomic<int> inner{0}, mismatched{0};
  ParallelFor(4, [&](int, int outer_thread) {
    ParallelFor(3, [&](int, int t) {
      ++inner;
      if (t != outer_thread) ++mismatched;
    });
  });
  EXPECT_EQ(inner, 12);
  EXPECT_EQ(mismatched, 0);
}

TEST(Parallel, RangesCoverEverythingOnce) {
  ThreadsGuard guard;
  SetCpuThreads(2);
  for (size_t n : {size_t(0), size_t(1), size_t(999), size_t(100000)}) {
    std::vector<int> hits(n);
    ParallelRange(n, 1000, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << i;
  }
}

TEST(Parallel, SgemmBlocksArePowersOfTwoFromTheShapeAlone) {
  EXPECT_EQ(SgemmBlocks(7.9e6, 4096), 1);  // too small to pay for a second packing
  EXPECT_EQ(SgemmBlocks(8e6, 4096), 2);
  // The wide CNN's dense layer (64 x 1024 x 3136, 411 MFLOP) was cut in 3: now 2, so that
  // 2 threads share it evenly.
  EXPECT_EQ(SgemmBlocks(2.0 * 64 * 1024 * 3136, 1024), 2);
  EXPECT_EQ(SgemmBlocks(512e6, 4096), 4);
  EXPECT_EQ(SgemmBlocks(1024e6, 4096), 8);
  EXPECT_EQ(SgemmBlocks(1e12, 4096), 8);
  EXPECT_EQ(SgemmBlocks(1e12, 100), 2);  // at least 32 rows or columns a block
  EXPECT_EQ(SgemmBlocks(1e12, 63), 1);
  for (double flops = 1e6; flops < 1e11; flops *= 1.37) {
    const int blocks = SgemmBlocks(flops, 1 << 20);
    EXPECT_EQ(blocks & (blocks - 1), 0) << flops << " FLOPs: " << blocks << " blocks";
  }
}

TEST(Parallel, ABlockExceptionReachesTheCaller) {
  ThreadsGuard guard;
  SetCpuThreads(2);
  EXPECT_THROW(ParallelFor(8,
                           [](int b, int) {
                             if (b == 5) throw std::runtime_error("block 5");
                           }),
               std::runtime_error);
  int ran = 0;
  ParallelFor(1, [&](int, int) { ++ran; });  // the pool still works afterwards
  EXPECT_EQ(ran, 1);
}

// One training step of a small CNN (conv, relu, pool, dense: every parallel pass),
// returning the logits, every parameter gradient and the updated parameters.
std::vector<float> TrainingStep(int threads) {
  SetCpuThreads(threads);
  std::vector<std::unique_ptr<Layer>> layers;
  Shape3 shape{3, 12, 12};
  auto add = [&](LayerSpec s) {
    layers.push_back(MakeLayer(s, shape));
    shape = layers.back()->output_shape();
  };
  LayerSpec conv;
  conv.kind = LayerKind::Conv2d;
  conv.filters = 8;
  conv.kernel = 3;
  conv.padding = 1;
  add(conv);
  LayerSpec relu;
  relu.kind = LayerKind::Relu;
  add(relu);
  LayerSpec pool;
  pool.kind = LayerKind::MaxPool2d;
  pool.kernel = 2;
  pool.stride = 2;
  add(pool);
  conv.filters = 64;  // 2304 features: the dense GEMMs are big enough to be cut in blocks
  add(conv);
  add(relu);
  LayerSpec dense;
  dense.kind = LayerKind::Dense;
  dense.units = 300;
  add(dense);
  add(relu);
  dense.units = 10;
  add(dense);

  std::mt19937_64 rng(7);
  for (auto& l : layers) l->init(rng);
  const int n = 19;  // not a multiple of the gradient chunks or of any thread count
  Tensor x({n, 3, 12, 12});
  std::normal_distribution<float> dist;
  for (float& v : x) v = dist(rng);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[size_t(i)] = i % 10;

  ForwardContext ctx;
  ctx.training = true;
  std::vector<Tensor> acts(layers.size()), grads(layers.size());
  const Tensor* in = &x;
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i]->forward(*in, acts[i], ctx);
    in = &acts[i];
  }
  Tensor grad;
  int64_t correct = 0;
  SoftmaxCrossEntropy(acts.back(), labels.data(), 1.0f / n, &grad, &correct);
  const Tensor* g = &grad;
  for (size_t k = layers.size(); k-- > 0;) {
    layers[k]->backward(k == 0 ? x : acts[k - 1], acts[k], *g, &grads[k]);
    g = &grads[k];
  }
  std::vector<float> all(acts.back().to_vector());
  all.insert(all.end(), grads[0].begin(), grads[0].end());
  std::vector<NamedParam> params;
  for (auto& l : layers)
    for (const ParamRef& p : l->params()) {
      all.insert(all.end(), p.grad->begin(), p.grad->end());
      params.push_back({p.name, p});
    }
  OptimizerSpec spec;
  spec.momentum = 0.9;
  spec.weight_decay = 1e-4;
  auto opt = MakeOptimizer(spec);
  opt->update(params, 0.1, 0);
  for (const auto& p : params) all.insert(all.end(), p.ref.value->begin(), p.ref.value->end());
  return all;
}

TEST(Parallel, TrainingStepIsBitIdenticalForAnyThreadCount) {
  ThreadsGuard guard;
  const std::vector<float> one = TrainingStep(1);
  for (int threads : {2, 3, 4}) {
    const std::vector<float> many = TrainingStep(threads);
    ASSERT_EQ(many.size(), one.size());
    size_t differ = 0;
    for (size_t i = 0; i < one.size(); ++i) differ += one[i] != many[i];
    EXPECT_EQ(differ, 0u) << threads << " threads";
  }
}

}  // namespace
}  // namespace dlh
