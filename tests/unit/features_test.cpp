// Tests of the estimator's per-sample cost accounting (estimator/model/features.cpp) against
// numbers computed by hand, and of the training memory formula.
#include "estimator/model/features.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "launcher/nn/layers/conv_tiles.hpp"
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

LayerSpec AvgPool(int kernel, int stride, int padding) {
  LayerSpec l;
  l.kind = LayerKind::AvgPool2d;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}
LayerSpec Residual(std::vector<LayerSpec> layers, std::vector<LayerSpec> shortcut = {}) {
  LayerSpec l;
  l.kind = LayerKind::Residual;
  l.layers = std::move(layers);
  l.shortcut = std::move(shortcut);
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

// The CPU engine runs no backward below the lowest layer with parameters, nor that layer's
// input gradient (launcher/nn/layer_stack.cpp); the GPU engine skips only the first layer's.
// The sums count what the GPU engine runs, cpu_skipped_* what the CPU engine leaves out.
TEST(FeaturesTest, CpuEngineSkipsTheBackwardBelowTheLowestParameters) {
  const TrainSpec mlp = Net(
      {1, 28, 28}, 10,
      {Of(LayerKind::Flatten), Of(LayerKind::Dropout), Dense(100), Of(LayerKind::Relu), Dense(10)});
  ModelFeatures f = ComputeFeatures(mlp);
  // dense 784 -> 100: the input gradient, 2 * 78400; dropout on 784: its backward, 784.
  EXPECT_DOUBLE_EQ(f.cpu_skipped_dense_flops_bwd, 2 * 78400);
  EXPECT_DOUBLE_EQ(f.cpu_skipped_other_flops_bwd, 784);
  EXPECT_DOUBLE_EQ(f.cpu_skipped_conv_flops_bwd, 0);
  EXPECT_DOUBLE_EQ(f.dense_flops_bwd, (4 * 78400 + 100) + (4 * 1000 + 10));
  const std::vector<ModelFeatures> layers = TopLevelLayerFeatures(mlp);
  ASSERT_EQ(layers.size(), 5u);
  EXPECT_DOUBLE_EQ(layers[1].cpu_skipped_other_flops_bwd, 784);
  EXPECT_DOUBLE_EQ(layers[2].cpu_skipped_dense_flops_bwd, 2 * 78400);
  EXPECT_DOUBLE_EQ(layers[4].cpu_skipped_dense_flops_bwd, 0);

  // A pool before the first convolution: the convolution's input gradient (X = 9*2*4*16 =
  // 1152 multiply-adds on the pooled 2x4x4) and its column gradient (18 * 16 values).
  f = ComputeFeatures(
      Net({2, 8, 8}, 3, {Pool(2), Conv(4, 3, 1, 1), Of(LayerKind::Flatten), Dense(3)}));
  EXPECT_DOUBLE_EQ(f.cpu_skipped_conv_flops_bwd, 2 * 1152);
  EXPECT_DOUBLE_EQ(f.cpu_skipped_workspace_elements, 18 * 16);
  EXPECT_DOUBLE_EQ(f.cpu_skipped_other_flops_bwd, 0);  // the pool is first for both engines

  // A first layer with parameters: both engines run the same backward.
  f = ComputeFeatures(Fashion());
  EXPECT_DOUBLE_EQ(f.cpu_skipped_conv_flops_bwd + f.cpu_skipped_dense_flops_bwd +
                       f.cpu_skipped_other_flops_bwd + f.cpu_skipped_workspace_elements,
                   0);
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
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 128, 1, MemoryEngine::kDevice),
                   5062008.0 + 132868096.0 + 61415424.0);
  // Adam (2 slots), batch 1: 4*421834*4 + 4*129754*2 + 4*119952.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 1, 2, MemoryEngine::kDevice),
                   6749344.0 + 1038032.0 + 479808.0);
  // No batch: the weights and their state only.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 0, 0, MemoryEngine::kDevice), 4.0 * 421834 * 2);
  // Linear in the batch.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 64, 1, MemoryEngine::kDevice) -
                       TrainingMemoryBytes(f, 32, 1, MemoryEngine::kDevice),
                   TrainingMemoryBytes(f, 32, 1, MemoryEngine::kDevice) -
                       TrainingMemoryBytes(f, 0, 1, MemoryEngine::kDevice));
  EXPECT_THROW(TrainingMemoryBytes(f, -1, 1, MemoryEngine::kDevice), EstimateError);
  EXPECT_THROW(TrainingMemoryBytes(f, 1, -1, MemoryEngine::kDevice), EstimateError);
}

// The CPU engine's count, layer by layer of the example (no layer fused: a batchnorm follows
// each convolution). Per sample, what each layer keeps (output, input gradient, scratch):
//   conv 32    25088 (first: no input gradient)
//   batchnorm  25088 x 3 (output, normalised input, gradient)        75264
//   relu       25088 x 2                                             50176
//   maxpool    6272 + 6272 winners + 25088                           37632
//   conv 64    12544 + 6272                                          18816
//   batchnorm  12544 x 3 = 37632;  relu 12544 x 2 = 25088
//   maxpool    3136 + 3136 + 12544 = 18816;  flatten 3136 x 2 = 6272
//   dropout    3136 x 3 = 9408;  dense 128 + 3136 = 3264;  relu 256
//   dropout    384;  dense 10 + 128 = 138                            sum 308234
// plus the input batch three times (3 x 784): 310586. Whatever the batch: column tiles
// 9x28x28 (the first layer's, once) + 2 x 288x14x14 = 119952; weights 288 + 18432 = 18720,
// partial sums min(batch, 8) times. Momentum (1 slot): 5 copies of the 421834 parameters.
// make bench's memory part measures this model against it (BENCHMARKS.md, "A rank's memory").
// The column tile the estimator counts for a convolution is the one the CPU engine takes
// (launcher/nn/layers/conv_tiles.hpp): one row, a few, or the whole plane; and with a ReLU
// or pool fused into it, one sample's full-size output more.
TEST(FeaturesTest, ConvolutionScratchIsTheEnginesTile) {
  struct Case {
    Shape3 in;
    int filters, kernel, stride;
  };
  for (const Case& k :
       {Case{{1, 28, 28}, 8, 3, 1}, Case{{64, 56, 56}, 64, 3, 1}, Case{{512, 14, 14}, 16, 3, 1},
        Case{{3, 224, 224}, 8, 7, 2}, Case{{2048, 9, 9}, 4, 3, 1}}) {
    const TrainSpec plain =
        Net(k.in, 10,
            {Conv(k.filters, k.kernel, k.stride, k.kernel / 2), Of(LayerKind::Flatten), Dense(10)});
    const ModelFeatures f = ComputeFeatures(plain);
    const Shape3 out = f.layers[0].out;
    const int ckk = k.in.channels * k.kernel * k.kernel;
    const double tile = double(ckk) * ConvTileRows(ckk, out.height, out.width) * out.width;
    // The first layer computes no input gradient: one tile, no gradient tile.
    EXPECT_DOUBLE_EQ(f.cpu_conv_scratch_elements, tile) << k.in.channels << "x" << k.in.height;
    const TrainSpec fused = Net(k.in, 10,
                                {Conv(k.filters, k.kernel, k.stride, k.kernel / 2),
                                 Of(LayerKind::Relu), Of(LayerKind::Flatten), Dense(10)});
    EXPECT_DOUBLE_EQ(ComputeFeatures(fused).cpu_conv_scratch_elements, tile + out.elements());
  }
}

TEST(FeaturesTest, TrainingMemoryBytesOfTheCpuEngine) {
  const ModelFeatures f = ComputeFeatures(Fashion());
  EXPECT_DOUBLE_EQ(f.cpu_held_elements, 310586);
  EXPECT_DOUBLE_EQ(f.cpu_conv_scratch_elements, 119952);
  EXPECT_DOUBLE_EQ(f.conv_weight_elements, 18720);
  const double fixed = 4.0 * 421834 * 5 + 4.0 * 119952;
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 128, 1, MemoryEngine::kCpu),
                   fixed + 4.0 * 8 * 18720 + 4.0 * 128 * 310586);
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 4, 1, MemoryEngine::kCpu),
                   fixed + 4.0 * 4 * 18720 + 4.0 * 4 * 310586);
  // Adam: 7 copies.
  EXPECT_DOUBLE_EQ(TrainingMemoryBytes(f, 0, 2, MemoryEngine::kCpu),
                   4.0 * 421834 * 7 + 4.0 * 119952);
  // The per-layer figures add up to the model's (the input batches apart).
  double held = 0, scratch = 0, weights = 0;
  for (const LayerCost& l : f.layers)
    held += l.cpu_held_elements, scratch += l.cpu_scratch_elements,
        weights += l.conv_weight_elements;
  EXPECT_DOUBLE_EQ(held + 3 * 784, f.cpu_held_elements);
  EXPECT_DOUBLE_EQ(scratch, f.cpu_conv_scratch_elements);
  EXPECT_DOUBLE_EQ(weights, f.conv_weight_elements);
  EXPECT_THROW(TrainingMemoryBytes(f, -1, 1, MemoryEngine::kCpu), EstimateError);
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

// avgpool2d, globalavgpool2d, gelu and silu after a conv2d (none of them first), by hand.
TEST(FeaturesTest, PoolsAndActivations) {
  const ModelFeatures f = ComputeFeatures(
      Net({4, 8, 8}, 3,
          {Conv(4, 3, 1, 1), AvgPool(3, 2, 1), Of(LayerKind::Gelu), Of(LayerKind::Silu),
           Of(LayerKind::GlobalAvgPool2d), Of(LayerKind::Flatten), Dense(3)}));
  ASSERT_EQ(f.layers.size(), 7u);
  // avgpool k3 s2 p1 on 4x8x8: (8 + 2 - 3) / 2 + 1 = 4, out 4x4x4 = 64; 9 * 64 = 576 each way.
  EXPECT_EQ(f.layers[1].out, (Shape3{4, 4, 4}));
  EXPECT_DOUBLE_EQ(f.layers[1].flops_fwd, 576);
  EXPECT_DOUBLE_EQ(f.layers[1].flops_bwd, 576);
  // gelu on 64: 10 * 64 forward, 12 * 64 backward; silu 5 * 64 and 6 * 64.
  EXPECT_DOUBLE_EQ(f.layers[2].flops_fwd, 640);
  EXPECT_DOUBLE_EQ(f.layers[2].flops_bwd, 768);
  EXPECT_DOUBLE_EQ(f.layers[3].flops_fwd, 320);
  EXPECT_DOUBLE_EQ(f.layers[3].flops_bwd, 384);
  // globalavgpool: 4x4x4 -> 4x1x1, one add per input element each way.
  EXPECT_EQ(f.layers[4].out, (Shape3{4, 1, 1}));
  EXPECT_DOUBLE_EQ(f.layers[4].flops_fwd, 64);
  EXPECT_DOUBLE_EQ(f.layers[4].flops_bwd, 64);
  for (size_t i = 1; i <= 4; ++i) EXPECT_DOUBLE_EQ(f.layers[i].params, 0) << i;
  // Other: the four layers, plus the loss over 3 classes (9 forward, 6 backward).
  EXPECT_DOUBLE_EQ(f.other_flops_fwd, 576 + 640 + 320 + 64 + 9);
  EXPECT_DOUBLE_EQ(f.other_flops_bwd, 576 + 768 + 384 + 64 + 6);
  // 256 input + conv 256 + 64 + 64 + 64 + 4 + flatten 4 + dense 3.
  EXPECT_DOUBLE_EQ(f.activation_elements, 256 + 256 + 64 * 3 + 4 + 4 + 3);
  EXPECT_DOUBLE_EQ(f.cpu_fused_flops_fwd, 0);  // none follows a conv2d as fusion needs

  // First, each computes nothing backward (no input gradient to make).
  for (LayerSpec first : {AvgPool(2, 2, 0), Of(LayerKind::GlobalAvgPool2d), Of(LayerKind::Gelu),
                          Of(LayerKind::Silu)}) {
    const ModelFeatures g =
        ComputeFeatures(Net({2, 4, 4}, 3, {first, Of(LayerKind::Flatten), Dense(3)}));
    EXPECT_DOUBLE_EQ(g.layers[0].flops_bwd, 0) << LayerKindName(first.kind);
    EXPECT_GT(g.layers[0].flops_fwd, 0) << LayerKindName(first.kind);
  }
}

// A residual block costs what its layers written flat cost, plus the addition (one FLOP per
// output forward, one per input-gradient element backward) and its sum as an activation;
// it stays one entry of ModelFeatures::layers, holding its layers' costs.
TEST(FeaturesTest, ResidualIsItsLayersFlatPlusTheAddition) {
  // conv, relu (fused into it on the CPU, inside the path as at the top level), conv,
  // batchnorm; identity shortcut (8x8x8 in and out).
  const std::vector<LayerSpec> path = {Conv(8, 3, 1, 1), Of(LayerKind::Relu), Conv(8, 3, 1, 1),
                                       Of(LayerKind::BatchNorm)};
  std::vector<LayerSpec> flat = {Conv(8, 3, 1, 1)};
  flat.insert(flat.end(), path.begin(), path.end());
  flat.insert(flat.end(), {Of(LayerKind::Relu), Of(LayerKind::Flatten), Dense(2)});
  const ModelFeatures a = ComputeFeatures(Net({3, 8, 8}, 2, flat));
  const ModelFeatures r = ComputeFeatures(Net(
      {3, 8, 8}, 2,
      {Conv(8, 3, 1, 1), Residual(path), Of(LayerKind::Relu), Of(LayerKind::Flatten), Dense(2)}));
  const double add = 8 * 8 * 8;  // 512 elements out, and as many in

  ASSERT_EQ(r.layers.size(), 5u);
  const LayerCost& block = r.layers[1];
  EXPECT_EQ(block.kind, LayerKind::Residual);
  EXPECT_EQ(block.in, (Shape3{8, 8, 8}));
  EXPECT_EQ(block.out, (Shape3{8, 8, 8}));
  ASSERT_EQ(block.layers.size(), 4u);
  EXPECT_TRUE(block.shortcut.empty());
  EXPECT_TRUE(block.layers[1].cpu_fused);  // the relu after the path's first conv
  EXPECT_FALSE(block.cpu_fused);
  double fwd = 0, bwd = 0, params = 0, workspace = 0;
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE("nested layer " + std::to_string(i));
    const LayerCost& n = block.layers[i];
    const LayerCost& same = a.layers[i + 1];  // the flat spec's copy
    EXPECT_EQ(n.kind, same.kind);
    EXPECT_EQ(n.out, same.out);
    EXPECT_DOUBLE_EQ(n.flops_fwd, same.flops_fwd);
    EXPECT_DOUBLE_EQ(n.flops_bwd, same.flops_bwd);
    EXPECT_DOUBLE_EQ(n.params, same.params);
    EXPECT_DOUBLE_EQ(n.workspace_elements, same.workspace_elements);
    EXPECT_EQ(n.cpu_fused, same.cpu_fused);
    fwd += n.flops_fwd, bwd += n.flops_bwd, params += n.params;
    workspace += n.workspace_elements;
  }
  EXPECT_DOUBLE_EQ(block.flops_fwd, fwd + add);
  EXPECT_DOUBLE_EQ(block.flops_bwd, bwd + add);
  EXPECT_DOUBLE_EQ(block.params, params);
  EXPECT_DOUBLE_EQ(block.workspace_elements, workspace);
  EXPECT_DOUBLE_EQ(block.out_elements, add);

  // The sums: the nested GEMMs where top-level ones go, the addition with the rest.
  EXPECT_DOUBLE_EQ(r.conv_flops_fwd, a.conv_flops_fwd);
  EXPECT_DOUBLE_EQ(r.conv_flops_bwd, a.conv_flops_bwd);
  EXPECT_DOUBLE_EQ(r.dense_flops_fwd, a.dense_flops_fwd);
  EXPECT_DOUBLE_EQ(r.dense_flops_bwd, a.dense_flops_bwd);
  EXPECT_DOUBLE_EQ(r.other_flops_fwd, a.other_flops_fwd + add);
  EXPECT_DOUBLE_EQ(r.other_flops_bwd, a.other_flops_bwd + add);
  EXPECT_DOUBLE_EQ(r.cpu_fused_flops_fwd, a.cpu_fused_flops_fwd);
  EXPECT_DOUBLE_EQ(r.cpu_fused_flops_bwd, a.cpu_fused_flops_bwd);
  EXPECT_GT(r.cpu_fused_flops_fwd, 0);
  EXPECT_DOUBLE_EQ(r.activation_elements, a.activation_elements + add);  // the sum
  EXPECT_DOUBLE_EQ(r.params, a.params);
  EXPECT_DOUBLE_EQ(r.conv_workspace_elements, a.conv_workspace_elements);
  EXPECT_DOUBLE_EQ(r.conv_output_elements, a.conv_output_elements);
  EXPECT_EQ(r.conv_layers, 3);
  EXPECT_EQ(r.conv_layers, a.conv_layers);
  EXPECT_EQ(r.total_filters, a.total_filters);
  EXPECT_EQ(r.dense_layers, a.dense_layers);
  EXPECT_EQ(r.dense_nodes, a.dense_nodes);

  // A block inside a block: its layers once more, and one more addition.
  const ModelFeatures nested =
      ComputeFeatures(Net({3, 8, 8}, 2,
                          {Conv(8, 3, 1, 1), Residual({Residual(path), Of(LayerKind::Relu)}),
                           Of(LayerKind::Flatten), Dense(2)}));
  ASSERT_EQ(nested.layers.size(), 4u);
  ASSERT_EQ(nested.layers[1].layers.size(), 2u);
  EXPECT_EQ(nested.layers[1].layers[0].kind, LayerKind::Residual);
  EXPECT_DOUBLE_EQ(nested.conv_flops_bwd, a.conv_flops_bwd);
  EXPECT_DOUBLE_EQ(nested.other_flops_fwd, a.other_flops_fwd + 2 * add);
  EXPECT_DOUBLE_EQ(nested.activation_elements, a.activation_elements + 2 * add);
  EXPECT_DOUBLE_EQ(nested.params, a.params);
}

// A block at layer 0: the first layer of each path gets no input gradient, and neither does
// the block (no sum of the paths' input gradients).
TEST(FeaturesTest, FirstResidualBlock) {
  // 2x6x6 in; main path conv 2 -> 4 k3 p1 and relu, shortcut conv 2 -> 4 k1.
  const ModelFeatures f =
      ComputeFeatures(Net({2, 6, 6}, 3,
                          {Residual({Conv(4, 3, 1, 1), Of(LayerKind::Relu)}, {Conv(4, 1, 1, 0)}),
                           Of(LayerKind::Flatten), Dense(3)}));
  const LayerCost& block = f.layers[0];
  ASSERT_EQ(block.layers.size(), 2u);
  ASSERT_EQ(block.shortcut.size(), 1u);
  // main conv: X = 9*2*4*36 = 2592; fwd 2X + 144 = 5328; bwd the same (first: no dX);
  // columns 18 * 36 = 648, once.
  EXPECT_DOUBLE_EQ(block.layers[0].flops_fwd, 5328);
  EXPECT_DOUBLE_EQ(block.layers[0].flops_bwd, 5328);
  EXPECT_DOUBLE_EQ(block.layers[0].workspace_elements, 648);
  // relu on 144, second in its path: 144 each way, fused into the conv.
  EXPECT_DOUBLE_EQ(block.layers[1].flops_bwd, 144);
  EXPECT_TRUE(block.layers[1].cpu_fused);
  // shortcut conv: X = 2*4*36 = 288; fwd = bwd = 576 + 144 = 720; columns 72, once.
  EXPECT_DOUBLE_EQ(block.shortcut[0].flops_fwd, 720);
  EXPECT_DOUBLE_EQ(block.shortcut[0].flops_bwd, 720);
  EXPECT_DOUBLE_EQ(block.shortcut[0].workspace_elements, 72);
  // The block: its paths, the addition forward (144), nothing more backward.
  EXPECT_DOUBLE_EQ(block.flops_fwd, 5328 + 144 + 720 + 144);
  EXPECT_DOUBLE_EQ(block.flops_bwd, 5328 + 144 + 720);
  EXPECT_DOUBLE_EQ(f.conv_workspace_elements, 648 + 72);
  EXPECT_DOUBLE_EQ(f.conv_flops_fwd, 5328 + 720);
  EXPECT_DOUBLE_EQ(f.conv_flops_bwd, 5328 + 720);
  EXPECT_EQ(f.conv_layers, 2);
  EXPECT_EQ(f.total_filters, 8);
  // 72 input + 144 conv + 144 relu + 144 shortcut conv + 144 sum + 144 flatten + 3 dense.
  EXPECT_DOUBLE_EQ(f.activation_elements, 72 + 5 * 144 + 3);
}

// A ResNet basic block that halves the image and doubles the channels, with the projection
// shortcut (conv 1x1 stride 2, batchnorm), after a stem; then global average pooling.
TrainSpec ResNetBlock() {
  return ParseSpec(R"({
    "name": "resnet-block",
    "input": {"channels": 3, "height": 8, "width": 8},
    "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1},
      {"type": "residual",
       "layers": [
         {"type": "conv2d", "filters": 32, "kernel": 3, "stride": 2, "padding": 1},
         {"type": "batchnorm"}, {"type": "relu"},
         {"type": "conv2d", "filters": 32, "kernel": 3, "padding": 1},
         {"type": "batchnorm"}],
       "shortcut": [
         {"type": "conv2d", "filters": 32, "kernel": 1, "stride": 2},
         {"type": "batchnorm"}]},
      {"type": "relu"},
      {"type": "globalavgpool2d"},
      {"type": "flatten"},
      {"type": "dense", "units": 10}
    ],
    "optimizer": {"type": "sgd", "lr": 0.1}, "batch_size": 8, "epochs": 1, "dataset": "d.h5"
  })",
                   "resnet.json", "");
}

TEST(FeaturesTest, ResNetBlockWithProjectionShortcut) {
  const ModelFeatures f = ComputeFeatures(ResNetBlock());
  ASSERT_EQ(f.layers.size(), 6u);
  const LayerCost& block = f.layers[1];
  EXPECT_EQ(block.in, (Shape3{16, 8, 8}));
  EXPECT_EQ(block.out, (Shape3{32, 4, 4}));
  // main: conv 16 -> 32 k3: 32*16*9 + 32 = 4640; batchnorm 64; conv 32 -> 32 k3:
  // 32*32*9 + 32 = 9248; batchnorm 64. Shortcut: conv 16 -> 32 k1: 512 + 32 = 544;
  // batchnorm 64.
  EXPECT_DOUBLE_EQ(block.params, 4640 + 64 + 9248 + 64 + 544 + 64);  // 14624
  EXPECT_DOUBLE_EQ(block.shortcut[0].params, 544);
  // stem 16*3*9 + 16 = 448; dense 32 -> 10: 330.
  EXPECT_DOUBLE_EQ(f.params, 448 + 14624 + 330);
  EXPECT_EQ(f.conv_layers, 4);
  EXPECT_EQ(f.total_filters, 16 + 32 + 32 + 32);
  // globalavgpool: 32x4x4 -> 32x1x1.
  EXPECT_EQ(f.layers[3].out, (Shape3{32, 1, 1}));
  EXPECT_DOUBLE_EQ(f.layers[3].flops_fwd, 512);
  // The addition: 512 out forward, 16x8x8 = 1024 input-gradient elements backward.
  double fwd = 0, bwd = 0;
  for (const std::vector<LayerCost>* p : {&block.layers, &block.shortcut})
    for (const LayerCost& n : *p) fwd += n.flops_fwd, bwd += n.flops_bwd;
  EXPECT_DOUBLE_EQ(block.flops_fwd - fwd, 512);
  EXPECT_DOUBLE_EQ(block.flops_bwd - bwd, 1024);
}

// The CPU engine agrees: one layer per top-level entry (a block is one), the same output
// shapes and parameter count.
TEST(FeaturesTest, ResNetBlockMatchesEngine) {
  const TrainSpec spec = ResNetBlock();
  const ModelFeatures f = ComputeFeatures(spec);
  Network net(spec);
  EXPECT_EQ(double(net.num_param_values()), f.params);
  ASSERT_EQ(net.num_layers(), f.layers.size());
  for (size_t i = 0; i < net.num_layers(); ++i)
    EXPECT_EQ(net.layer(i).output_shape(), f.layers[i].out) << "layer " << i;
}

}  // namespace
}  // namespace dlh
