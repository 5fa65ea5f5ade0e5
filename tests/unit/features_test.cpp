// Tests of the estimator's per-sample cost accounting (estimator/model/features.cpp) against
// numbers computed by hand, and of the training memory formula.
#include "estimator/model/features.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "launcher/nn/network.hpp"

namespace dlh {
namespace {

LayerSpec Conv(int filters, int kernel, int stride, int padding) {
  LayerSpec l;
  l.kind = LayerKind::Conv2d;
  l.filters = filters;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}
LayerSpec Pool(int kernel) {
  LayerSpec l;
  l.kind = LayerKind::MaxPool2d;
  l.kernel = kernel;
  l.stride = kernel;
  return l;
}
LayerSpec Dense(int units) {
  LayerSpec l;
  l.kind = LayerKind::Dense;
  l.units = units;
  return l;
}
LayerSpec Of(LayerKind kind) {
  LayerSpec l;
  l.kind = kind;
  if (kind == LayerKind::Dropout) l.rate = 0.5;
  return l;
}

TrainSpec Net(Shape3 input, int classes, std::vector<LayerSpec> layers) {
  TrainSpec s;
  s.name = "test";
  s.origin = "test.json";
  s.input = input;
  s.classes = classes;
  s.layers = std::move(layers);
  s.batch_size = 32;
  s.epochs = 1;
  return s;
}

// share/examples/fashion-mnist.json (the same layers; the test does not depend on the
// working directory).
TrainSpec Fashion() {
  return ParseSpec(R"({
    "name": "fashion-cnn",
    "input": {"channels": 1, "height": 28, "width": 28},
    "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 32, "kernel": 3, "stride": 1, "padding": 1},
      {"type": "batchnorm"},
      {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "conv2d", "filters": 64, "kernel": 3, "stride": 1, "padding": 1},
      {"type": "batchnorm"},
      {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "flatten"},
      {"type": "dropout", "rate": 0.25},
      {"type": "dense", "units": 128},
      {"type": "relu"},
      {"type": "dropout", "rate": 0.3},
      {"type": "dense", "units": 10}
    ],
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": true},
    "batch_size": 128,
    "epochs": 8,
    "seed": 1,
    "dataset": "fashion-mnist.h5"
  })",
                   "fashion-mnist.json", "");
}

// One conv2d (3 -> 4 filters, kernel 3, stride 2, padding 1) on a 3x9x9 input, then
// flatten and dense 100 -> 2.
TEST(FeaturesTest, SingleConvLayer) {
  const ModelFeatures f =
      ComputeFeatures(Net({3, 9, 9}, 2, {Conv(4, 3, 2, 1), Of(LayerKind::Flatten), Dense(2)}));
  ASSERT_EQ(f.layers.size(), 3u);

  // conv: Ho = Wo = (9 + 2*1 - 3) / 2 + 1 = 5, output 4x5x5 = 100 values.
  //   multiply-adds X = K*K*C*F*Ho*Wo = 9*3*4*25 = 2700
  //   forward  = 2X + F*Ho*Wo = 5400 + 100 = 5500
  //   backward = 2X + 100 (weight, bias) = 5500; no input gradient (first layer)
  //   params   = F*C*K*K + F = 108 + 4 = 112
  //   im2col   = C*K*K * Ho*Wo = 27 * 25 = 675 (no gradient columns: first layer)
  const LayerCost& c = f.layers[0];
  EXPECT_EQ(c.kind, LayerKind::Conv2d);
  EXPECT_EQ(c.in, (Shape3{3, 9, 9}));
  EXPECT_EQ(c.out, (Shape3{4, 5, 5}));
  EXPECT_DOUBLE_EQ(c.flops_fwd, 5500);
  EXPECT_DOUBLE_EQ(c.flops_bwd, 5500);
  EXPECT_DOUBLE_EQ(c.params, 112);
  EXPECT_DOUBLE_EQ(c.out_elements, 100);
  EXPECT_DOUBLE_EQ(c.workspace_elements, 675);

  // flatten: no FLOPs, 100 values out.
  EXPECT_DOUBLE_EQ(f.layers[1].flops_fwd, 0);
  EXPECT_DOUBLE_EQ(f.layers[1].flops_bwd, 0);
  EXPECT_EQ(f.layers[1].out, (Shape3{100, 1, 1}));

  // dense 100 -> 2: forward 2*100*2 + 2 = 402; backward 400 + 2 + 400 (input) = 802;
  // params 200 + 2 = 202.
  EXPECT_DOUBLE_EQ(f.layers[2].flops_fwd, 402);
  EXPECT_DOUBLE_EQ(f.layers[2].flops_bwd, 802);
  EXPECT_DOUBLE_EQ(f.layers[2].params, 202);

  EXPECT_DOUBLE_EQ(f.conv_flops_fwd, 5500);
  EXPECT_DOUBLE_EQ(f.conv_flops_bwd, 5500);
  EXPECT_DOUBLE_EQ(f.dense_flops_fwd, 402);
  EXPECT_DOUBLE_EQ(f.dense_flops_bwd, 802);
  // Only the loss over 2 classes: 3*2 forward, 2*2 backward.
  EXPECT_DOUBLE_EQ(f.other_flops_fwd, 6);
  EXPECT_DOUBLE_EQ(f.other_flops_bwd, 4);
  // 243 input + 100 conv + 100 flatten + 2 dense.
  EXPECT_DOUBLE_EQ(f.activation_elements, 445);
  EXPECT_DOUBLE_EQ(f.params, 314);
  EXPECT_DOUBLE_EQ(f.conv_workspace_elements, 675);
  EXPECT_EQ(f.conv_layers, 1);
  EXPECT_EQ(f.total_filters, 4);
  EXPECT_EQ(f.dense_layers, 1);
  EXPECT_EQ(f.dense_nodes, 2);
  EXPECT_EQ(f.input_elements, 243);
  EXPECT_DOUBLE_EQ(f.flops_fwd(), 5500 + 402 + 6);
  EXPECT_DOUBLE_EQ(f.flops_train(), 5908 + 5500 + 802 + 4);
  EXPECT_DOUBLE_EQ(f.param_bytes(), 4 * 314);
  EXPECT_DOUBLE_EQ(f.activation_bytes(), 4 * 445);
}

// The Fashion-MNIST CNN, layer by layer.
TEST(FeaturesTest, FashionExample) {
  const ModelFeatures f = ComputeFeatures(Fashion());
  ASSERT_EQ(f.layers.size(), 14u);
  auto expect = [&](size_t i, double fwd, double bwd, double params, double out) {
    SCOPED_TRACE("layer " + std::to_string(i));
    EXPECT_DOUBLE_EQ(f.layers[i].flops_fwd, fwd);
    EXPECT_DOUBLE_EQ(f.layers[i].flops_bwd, bwd);
    EXPECT_DOUBLE_EQ(f.layers[i].params, params);
    EXPECT_DOUBLE_EQ(f.layers[i].out_elements, out);
  };
  // [0] conv 1 -> 32, k3 p1 on 28x28: out 32x28x28 = 25088.
  //     X = 9*1*32*784 = 225792; fwd 2X + 25088 = 476672; bwd the same (first layer:
  //     weight and bias only); params 32*1*9 + 32 = 320.
  expect(0, 476672, 476672, 320, 25088);
  // [1] batchnorm on 25088: 8 per element both ways = 200704; params 2*32 = 64.
  expect(1, 200704, 200704, 64, 25088);
  // [2] relu: 25088 each way.
  expect(2, 25088, 25088, 0, 25088);
  // [3] maxpool k2: out 32x14x14 = 6272; fwd 4*6272 = 25088; bwd 6272.
  expect(3, 25088, 6272, 0, 6272);
  // [4] conv 32 -> 64, k3 p1 on 14x14: out 64x14x14 = 12544.
  //     X = 9*32*64*196 = 3612672; fwd 2X + 12544 = 7237888;
  //     bwd 2X + 12544 + 2X = 14463232; params 64*32*9 + 64 = 18496.
  expect(4, 7237888, 14463232, 18496, 12544);
  // [5] batchnorm on 12544: 100352 each way; params 128.
  expect(5, 100352, 100352, 128, 12544);
  // [6] relu: 12544 each way.
  expect(6, 12544, 12544, 0, 12544);
  // [7] maxpool k2: out 64x7x7 = 3136; fwd 4*3136 = 12544; bwd 3136.
  expect(7, 12544, 3136, 0, 3136);
  // [8] flatten: 3136 values, no FLOPs.
  expect(8, 0, 0, 0, 3136);
  // [9] dropout: 3136 each way.
  expect(9, 3136, 3136, 0, 3136);
  // [10] dense 3136 -> 128: 2*3136*128 = 802816; fwd 802816 + 128 = 802944;
  //      bwd 802816 + 128 + 802816 = 1605760; params 401408 + 128 = 401536.
  expect(10, 802944, 1605760, 401536, 128);
  // [11] relu, [12] dropout: 128 each way.
  expect(11, 128, 128, 0, 128);
  expect(12, 128, 128, 0, 128);
  // [13] dense 128 -> 10: fwd 2560 + 10 = 2570; bwd 2560 + 10 + 2560 = 5130; params 1290.
  expect(13, 2570, 5130, 1290, 10);

  EXPECT_DOUBLE_EQ(f.conv_flops_fwd, 476672 + 7237888);   // 7714560
  EXPECT_DOUBLE_EQ(f.conv_flops_bwd, 476672 + 14463232);  // 14939904
  EXPECT_DOUBLE_EQ(f.dense_flops_fwd, 802944 + 2570);     // 805514
  EXPECT_DOUBLE_EQ(f.dense_flops_bwd, 1605760 + 5130);    // 1610890
  // Other forward: 200704 + 25088 + 25088 + 100352 + 12544 + 12544 + 3136 + 128 + 128
  // + 30 (loss, 3*10) = 379742.
  EXPECT_DOUBLE_EQ(f.other_flops_fwd, 379742);
  // Other backward: 200704 + 25088 + 6272 + 100352 + 12544 + 3136 + 3136 + 128 + 128
  // + 20 (loss, 2*10) = 351508.
  EXPECT_DOUBLE_EQ(f.other_flops_bwd, 351508);
  // Activations: 784 input + 3*25088 + 6272 + 3*12544 + 3*3136 + 3*128 + 10 = 129754.
  EXPECT_DOUBLE_EQ(f.activation_elements, 129754);
  // Parameters: 320 + 64 + 18496 + 128 + 401536 + 1290 = 421834, of which 192 are
  // batchnorm gamma/beta (64 + 128): 421642 without them.
  EXPECT_DOUBLE_EQ(f.params, 421834);
  // im2col: conv0 9*1*784 = 7056; conv1 9*32*196 = 56448, twice (input gradient).
  EXPECT_DOUBLE_EQ(f.conv_workspace_elements, 7056 + 2 * 56448);  // 119952
  EXPECT_EQ(f.conv_layers, 2);
  EXPECT_EQ(f.total_filters, 96);
  EXPECT_EQ(f.dense_layers, 2);
  EXPECT_EQ(f.dense_nodes, 138);
  EXPECT_EQ(f.input_elements, 784);
}

// The engine agrees on the parameter count and the shapes.
TEST(FeaturesTest, FashionMatchesEngine) {
  const TrainSpec spec = Fashion();
  const ModelFeatures f = ComputeFeatures(spec);
  Network net(spec);
  EXPECT_EQ(double(net.num_param_values()), f.params);
  ASSERT_EQ(net.num_layers(), f.layers.size());
  double acts = double(spec.input.elements());
  for (size_t i = 0; i < net.num_layers(); ++i) {
    EXPECT_EQ(net.layer(i).output_shape(), f.layers[i].out) << "layer " << i;
    acts += double(net.layer(i).output_shape().elements());
  }
  EXPECT_DOUBLE_EQ(acts, f.activation_elements);
}

// A multilayer perceptron on 20 features: dense 16, batchnorm, relu, dropout, dense 4.
TEST(FeaturesTest, Mlp) {
  const ModelFeatures f =
      ComputeFeatures(Net({20, 1, 1}, 4,
                          {Dense(16), Of(LayerKind::BatchNorm), Of(LayerKind::Relu),
                           Of(LayerKind::Dropout), Dense(4)}));
  // dense 20 -> 16 (first): fwd 640 + 16 = 656; bwd 640 + 16 = 656 (no input gradient);
  // params 320 + 16 = 336.
  EXPECT_DOUBLE_EQ(f.layers[0].flops_fwd, 656);
  EXPECT_DOUBLE_EQ(f.layers[0].flops_bwd, 656);
  // batchnorm over 16 features: 128 each way, params 32.
  EXPECT_DOUBLE_EQ(f.layers[1].flops_fwd, 128);
  EXPECT_DOUBLE_EQ(f.layers[1].flops_bwd, 128);
  EXPECT_DOUBLE_EQ(f.layers[1].params, 32);
  // dense 16 -> 4: fwd 128 + 4 = 132; bwd 128 + 4 + 128 = 260; params 68.
  EXPECT_DOUBLE_EQ(f.layers[4].flops_bwd, 260);
  EXPECT_DOUBLE_EQ(f.dense_flops_fwd, 656 + 132);
  EXPECT_DOUBLE_EQ(f.dense_flops_bwd, 656 + 260);
  EXPECT_DOUBLE_EQ(f.conv_flops_fwd, 0);
  EXPECT_DOUBLE_EQ(f.conv_flops_bwd, 0);
  // other: batchnorm 128, relu 16, dropout 16, loss 3*4 = 12 / 2*4 = 8.
  EXPECT_DOUBLE_EQ(f.other_flops_fwd, 128 + 16 + 16 + 12);
  EXPECT_DOUBLE_EQ(f.other_flops_bwd, 128 + 16 + 16 + 8);
  EXPECT_DOUBLE_EQ(f.activation_elements, 20 + 16 * 4 + 4);  // 88
  EXPECT_DOUBLE_EQ(f.params, 336 + 32 + 68);                 // 436
  EXPECT_DOUBLE_EQ(f.conv_workspace_elements, 0);
  EXPECT_EQ(f.conv_layers, 0);
  EXPECT_EQ(f.total_filters, 0);
  EXPECT_EQ(f.dense_layers, 2);
  EXPECT_EQ(f.dense_nodes, 20);
  EXPECT_EQ(f.input_elements, 20);
}

// A first layer without weights computes nothing backward but its parameter gradients.
TEST(FeaturesTest, FirstLayerHasNoInputGradient) {
  // batchnorm on 2x4x4 = 32 values: fwd 8*32 = 256, bwd 3*32 = 96 (dgamma, dbeta only);
  // maxpool k2 -> 2x2x2 = 8: fwd 4*8 = 32, bwd 8; flatten; dense 8 -> 3: fwd 48 + 3 = 51,
  // bwd 48 + 3 + 48 = 99.
  ModelFeatures f = ComputeFeatures(
      Net({2, 4, 4}, 3, {Of(LayerKind::BatchNorm), Pool(2), Of(LayerKind::Flatten), Dense(3)}));
  EXPECT_DOUBLE_EQ(f.layers[0].flops_fwd, 256);
  EXPECT_DOUBLE_EQ(f.layers[0].flops_bwd, 96);
  EXPECT_DOUBLE_EQ(f.layers[1].flops_fwd, 32);
  EXPECT_DOUBLE_EQ(f.layers[1].flops_bwd, 8);
  EXPECT_DOUBLE_EQ(f.dense_flops_bwd, 99);
  EXPECT_DOUBLE_EQ(f.other_flops_fwd, 256 + 32 + 9);
  EXPECT_DOUBLE_EQ(f.other_flops_bwd, 96 + 8 + 6);

  // relu, maxpool or dropout first: nothing backward.
  for (LayerSpec first : {Of(LayerKind::Relu), Pool(2), Of(LayerKind::Dropout)}) {
    f = ComputeFeatures(Net({2, 4, 4}, 3, {first, Of(LayerKind::Flatten), Dense(3)}));
    EXPECT_DOUBLE_EQ(f.layers[0].flops_bwd, 0) << LayerKindName(first.kind);
    EXPECT_GT(f.layers[0].flops_fwd, 0) << LayerKindName(first.kind);
  }
}

TEST(FeaturesTest, BadSpecThrowsSpecError) {
  // Dense straight after a conv2d needs a flatten.
  TrainSpec bad = Net({1, 8, 8}, 2, {Conv(4, 3, 1, 0), Dense(2)});
  EXPECT_THROW(ComputeFeatures(bad), SpecError);
  bad = Net({1, 4, 4}, 2, {Conv(4, 7, 1, 0), Of(LayerKind::Flatten), Dense(2)});
  EXPECT_THROW(ComputeFeatures(bad), SpecError);
}

TEST(FeaturesTest, TrainingMemoryBytes) {
  const ModelFeatures f = ComputeFeatures(Fashion());
  // 4 * params * (2 + slots) + 4 * batch * activations * 2 + 4 * batch * im2col:
  // slots 1, batch 128:
  //   4 * 421834 * 3      =   5062008
  //   4 * 128 * 129754 * 2 = 132868096
  //   4 * 128 * 119952     =  61415424
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 128, 1), 5062008.0 + 132868096.0 + 61415424.0);
  // Adam (2 slots), batch 1: 4*421834*4 + 4*129754*2 + 4*119952.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 1, 2), 6749344.0 + 1038032.0 + 479808.0);
  // No batch: the weights and their state only.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 0, 0), 4.0 * 421834 * 2);
  // Linear in the batch.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 64, 1) - TrainingMemoryBytes(f, 32, 1),
                   TrainingMemoryBytes(f, 32, 1) - TrainingMemoryBytes(f, 0, 1));
  EXPECT_THROW(TrainingMemoryBytes(f, -1, 1), EstimateError);
  EXPECT_THROW(TrainingMemoryBytes(f, 1, -1), EstimateError);
}

// Seen under tests/fuzz/spec_fuzz (UBSan): ParseSpec accepts any layer up to INT_MAX
// outputs, and the sums of filters and units overflowed an int (undefined behaviour) for a
// spec the SPANK plugin plans from.
TEST(FeaturesTest, FilterAndUnitSumsBeyondIntMax) {
  const ModelFeatures f =
      ComputeFeatures(ParseSpec(R"({"input": {"channels": 1, "height": 1, "width": 1},
      "classes": 1500000000,
      "layers": [{"type": "conv2d", "filters": 1500000000, "kernel": 1},
                 {"type": "conv2d", "filters": 1500000000, "kernel": 1},
                 {"type": "dense", "units": 1500000000},
                 {"type": "dense", "units": 1500000000}],
      "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 1, "epochs": 1,
      "dataset": "d.h5"})",
                                "big.json", ""));
  EXPECT_EQ(f.total_filters, int64_t{3000000000});
  EXPECT_EQ(f.dense_nodes, int64_t{3000000000});
}

}  // namespace
}  // namespace dlh
