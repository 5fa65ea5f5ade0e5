// DLH — unit tests of layer fusion (launcher/nn/layers/fuse.hpp): which pairs fuse, and that
// a network with a ReLU running inside its convolution computes exactly what the same layers
// run one by one compute, at any thread count.
#include "launcher/nn/layers/fuse.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "estimator/model/features.hpp"
#include "launcher/nn/network.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

class ThreadsGuard {  // restores the thread count a test changed
 public:
  ThreadsGuard() : saved_(CpuThreads()) {}
  ~ThreadsGuard() { SetCpuThreads(saved_); }

 private:
  int saved_;
};

// Every fusion the engine has and a few it must not make: conv+relu+pool (the pool on an
// odd plane, whose last row and column no window covers; a convolution after it, so that
// the gradients of pooled zeros are not masked again), conv+pool without a ReLU, conv+relu before a
// pool that is not 2x2 with stride 2 (not fused), and a ReLU after a dense layer (not fused).
TrainSpec Spec() {
  return ParseSpec(R"({
    "input": {"channels": 2, "height": 11, "width": 11}, "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "conv2d", "filters": 12, "kernel": 3, "padding": 1},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "conv2d", "filters": 10, "kernel": 1}, {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2, "stride": 1},
      {"type": "flatten"}, {"type": "dense", "units": 20}, {"type": "relu"},
      {"type": "dense", "units": 10}],
    "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 13, "epochs": 1,
    "dataset": "data.h5"})",
                   "fuse.json", "");
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Fuse, OnlyAReluAndAPlainPoolRightAfterAConvolutionFuse) {
  const TrainSpec spec = Spec();
  Network net(spec);
  std::vector<bool> fused;
  for (size_t i = 0; i < net.num_layers(); ++i) fused.push_back(FusedIntoPrevious(net.layer(i)));
  EXPECT_EQ(fused, (std::vector<bool>{false, true, true, false, true, false, true, false, false,
                                      false, false, false}));
  // Layers built one by one fuse nothing until asked.
  const std::vector<Shape3> shapes = LayerShapes(spec);
  std::vector<std::unique_ptr<Layer>> layers;
  for (size_t i = 0; i < spec.layers.size(); ++i)
    layers.push_back(MakeLayer(spec.layers[i], shapes[i]));
  for (const auto& layer : layers) EXPECT_FALSE(FusedIntoPrevious(*layer));
  EXPECT_EQ(FuseFollowers(layers, 1), 0u);  // a ReLU runs nothing
  EXPECT_EQ(FuseFollowers(layers, 2), 0u);
  EXPECT_EQ(FuseFollowers(layers, 5), 1u);   // the ReLU, not the 2x2 pool of stride 1
  EXPECT_EQ(FuseFollowers(layers, 11), 0u);  // the last layer
  EXPECT_TRUE(FusedIntoPrevious(*layers[6]));
  EXPECT_FALSE(FusedIntoPrevious(*layers[7]));
}

// The estimator's features (estimator/model/features.cpp) apply the same rule to the spec alone.
TEST(Fuse, TheEstimatorKnowsWhichLayersFuse) {
  // Spec() and the layers of share/bench/cnn-deep.json (conv, relu, conv, relu, pool, ...).
  const TrainSpec deep = ParseSpec(R"({
    "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "conv2d", "filters": 64, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "conv2d", "filters": 64, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2}, {"type": "flatten"},
      {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 10}],
    "optimizer": {"type": "sgd", "lr": 0.01}, "batch_size": 64, "epochs": 1,
    "dataset": "data.h5"})",
                                   "deep.json", "");
  for (const TrainSpec& spec : {Spec(), deep}) {
    Network net(spec);
    const ModelFeatures f = ComputeFeatures(spec);
    double fused_fwd = 0;
    for (size_t i = 0; i < net.num_layers(); ++i) {
      EXPECT_EQ(f.layers[i].cpu_fused, FusedIntoPrevious(net.layer(i))) << spec.name << " " << i;
      if (f.layers[i].cpu_fused) fused_fwd += f.layers[i].flops_fwd;
    }
    EXPECT_EQ(f.cpu_fused_flops_fwd, fused_fwd) << spec.name;
  }
}

TEST(Fuse, FusedNetworkIsBitIdenticalToTheLayersOneByOne) {
  ThreadsGuard guard;
  const TrainSpec spec = Spec();
  const std::vector<Shape3> shapes = LayerShapes(spec);
  const int n = 13;  // not a multiple of the gradient chunks or of any thread count
  Tensor x({n, 2, 11, 11});
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[size_t(i)] = i % 10;
  ForwardContext ctx;
  ctx.training = true;

  // The reference: every layer unfused, run in turn, on 3 threads.
  SetCpuThreads(3);
  Network net(spec);
  net.init(9);
  std::vector<std::unique_ptr<Layer>> layers;
  size_t next_param = 0;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    layers.push_back(MakeLayer(spec.layers[i], shapes[i]));
    for (const ParamRef& p : layers.back()->params())
      p.value->assign(net.params()[next_param++].ref.value->to_vector());
  }
  ASSERT_EQ(next_param, net.params().size());
  std::vector<Tensor> acts(layers.size()), grads(layers.size());
  const Tensor* in = &x;
  for (size_t i = 0; i < layers.size(); ++i) {
    layers[i]->forward(*in, acts[i], ctx);
    in = &acts[i];
  }
  Tensor grad_logits;
  int64_t correct = 0;
  SoftmaxCrossEntropy(acts.back(), labels.data(), 1.0f / n, &grad_logits, &correct);
  const Tensor* g = &grad_logits;
  for (size_t k = layers.size(); k-- > 0;) {
    layers[k]->backward(k == 0 ? x : acts[k - 1], acts[k], *g, k == 0 ? nullptr : &grads[k]);
    g = &grads[k];
  }

  // The network, fused, on 1 and 2 threads.
  for (int threads : {1, 2}) {
    SetCpuThreads(threads);
    const Tensor& logits = net.forward(x, ctx);
    EXPECT_TRUE(SameBits(logits, acts.back())) << threads << " threads";
    Tensor net_grad;
    SoftmaxCrossEntropy(logits, labels.data(), 1.0f / n, &net_grad, &correct);
    std::vector<size_t> done;
    net.backward(net_grad, [&](size_t k) { done.push_back(k); });
    EXPECT_EQ(done, (std::vector<size_t>{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
    size_t p = 0;
    for (const auto& layer : layers)
      for (const ParamRef& ref : layer->params()) {
        EXPECT_TRUE(SameBits(*net.params()[p].ref.grad, *ref.grad))
            << net.params()[p].name << ", " << threads << " threads";
        ++p;
      }
  }
}

}  // namespace
}  // namespace dlh
