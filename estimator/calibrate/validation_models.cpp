// DLH estimator — the validation models: architectures outside the calibration sweep that
// the time model is validated on (dlh-estimate validate). Two sets, kept apart: the "term"
// models, on which the time model's terms were chosen, and the "judged" ones, which took no
// part in choosing them and judge it. Pure spec construction: nothing here runs the engine.
#include <string>
#include <vector>

#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/spec_builders.hpp"

namespace dlh {

using spec_builders::BaseSpec;
using spec_builders::Conv;
using spec_builders::Dense;
using spec_builders::Dropout;
using spec_builders::kClasses;
using spec_builders::Pool;
using spec_builders::Simple;

namespace {

// A validation model as the sweep's entries are: its layers' shapes filled in, its batch the
// spec's.
SweepEntry EntryOf(TrainSpec s) {
  LayerShapes(s);
  SweepEntry e;
  e.batch = s.batch_size;
  e.spec = std::move(s);
  return e;
}

}  // namespace

std::vector<SweepEntry> ValidationModels() {
  const std::string origin = "validation models";
  std::vector<SweepEntry> out;
  auto add = [&](TrainSpec s) { out.push_back(EntryOf(std::move(s))); };
  const LayerSpec relu = Simple(LayerKind::Relu), flatten = Simple(LayerKind::Flatten),
                  bn = Simple(LayerKind::BatchNorm);

  {  // LeNet-5: 5x5 kernels without padding, 2 pools, three dense layers.
    TrainSpec s = BaseSpec("val-lenet5-in32c1-b64", Shape3{1, 32, 32}, 64, origin);
    s.layers = {Conv(6, 5, 1, 0), relu,       Pool(2), Conv(16, 5, 1, 0), relu, Pool(2),
                flatten,          Dense(120), relu,    Dense(84),         relu, Dense(10)};
    add(s);
  }
  {  // Small VGG: two 3x3 conv + batchnorm per stage, stages of 16, 32 and 64 filters.
    TrainSpec s = BaseSpec("val-vgg-small-in32c3-b32", Shape3{3, 32, 32}, 32, origin);
    for (int filters : {16, 32, 64}) {
      for (int k = 0; k < 2; ++k)
        s.layers.insert(s.layers.end(), {Conv(filters, 3, 1, 1), bn, relu});
      s.layers.push_back(Pool(2));
    }
    s.layers.insert(s.layers.end(), {flatten, Dense(128), relu, Dropout(0.5), Dense(10)});
    add(s);
  }
  {  // Wide and shallow: one 5x5 conv of 96 filters, a 4x4 pool, the classifier.
    TrainSpec s = BaseSpec("val-wide-shallow-in28c1-b64", Shape3{1, 28, 28}, 64, origin);
    s.layers = {Conv(96, 5, 1, 2), relu, Pool(4), flatten, Dense(10)};
    add(s);
  }
  {  // Deep and narrow: six conv layers of 8-16 filters, pools after some only, and a
     // stride-2 conv instead of the last pool.
    TrainSpec s = BaseSpec("val-deep-narrow-in32c1-b64", Shape3{1, 32, 32}, 64, origin);
    s.layers = {Conv(8, 3, 1, 1),  relu, Conv(8, 3, 1, 1),  relu, Pool(2),
                Conv(12, 3, 1, 1), relu, Conv(12, 3, 1, 1), relu, Pool(2),
                Conv(16, 3, 2, 1), relu, Conv(16, 3, 1, 1), relu, flatten,
                Dense(10)};
    add(s);
  }
  {  // Multi-layer perceptron 784-1024-1024-10.
    TrainSpec s = BaseSpec("val-mlp-784-1024-1024-b128", Shape3{1, 28, 28}, 128, origin);
    s.layers = {flatten, Dense(1024), relu, Dense(1024), relu, Dense(10)};
    add(s);
  }
  {  // The Fashion-MNIST example (share/examples/fashion-mnist.json).
    TrainSpec s = BaseSpec("val-fashion-cnn-b128", Shape3{1, 28, 28}, 128, origin);
    s.layers = {Conv(32, 3, 1, 1),
                bn,
                relu,
                Pool(2),
                Conv(64, 3, 1, 1),
                bn,
                relu,
                Pool(2),
                flatten,
                Dropout(0.25),
                Dense(128),
                relu,
                Dropout(0.3),
                Dense(10)};
    s.optimizer.lr = 0.05;
    s.optimizer.nesterov = true;
    s.optimizer.weight_decay = 5e-4;
    add(s);
  }
  {  // All-convolutional: stride-2 convs with batchnorm instead of pooling, larger input.
    TrainSpec s = BaseSpec("val-allconv-s2-in48c3-b32", Shape3{3, 48, 48}, 32, origin);
    for (int filters : {32, 64, 128})
      s.layers.insert(s.layers.end(), {Conv(filters, 3, 2, 1), bn, relu});
    s.layers.insert(s.layers.end(), {flatten, Dropout(0.5), Dense(10)});
    add(s);
  }
  return out;
}

// Shapes neither the sweep nor the term set has (issue 40, part 6); each model's step is at
// most a few tens of ms on a 2-core CPU, so that timing all of them at --repeats 3 takes
// seconds. The two residual models joined on 2026-12-01, once the spec had residual blocks
// (the sweep's are identity blocks at stride 1 between dense heads), before any was timed.
std::vector<SweepEntry> JudgedValidationModels() {
  const std::string origin = "judged validation models";
  std::vector<SweepEntry> out;
  auto add = [&](TrainSpec s) { out.push_back(EntryOf(std::move(s))); };
  const LayerSpec relu = Simple(LayerKind::Relu), flatten = Simple(LayerKind::Flatten),
                  bn = Simple(LayerKind::BatchNorm);
  {  // Strided: three stride-2 3x3 convolutions on a 64 px colour input, no pooling.
    TrainSpec s = BaseSpec("val-strided-s2x3-in64c3-b32", Shape3{3, 64, 64}, 32, origin);
    s.layers = {Conv(24, 3, 2, 1), relu, Conv(48, 3, 2, 1), relu,
                Conv(64, 3, 2, 1), relu, flatten,           Dense(10)};
    add(s);
  }
  {  // Strided with large kernels: a 7x7 stride-2 stem, then a 5x5 stride-2 convolution.
    TrainSpec s = BaseSpec("val-strided-k7s2-in48c1-b64", Shape3{1, 48, 48}, 64, origin);
    s.layers = {Conv(16, 7, 2, 3), relu, Conv(32, 5, 2, 2), relu, Pool(2), flatten,
                Dense(64),         relu, Dense(10)};
    add(s);
  }
  {  // Wide: two 3x3 convolutions of 128 filters on a small colour input, the second
     // unpooled (the sweep pools after every convolution while the image allows).
    TrainSpec s = BaseSpec("val-wide-f128-in16c3-b16", Shape3{3, 16, 16}, 16, origin);
    s.layers = {Conv(128, 3, 1, 1), relu, Pool(2), Conv(128, 3, 1, 1), relu, flatten, Dense(10)};
    add(s);
  }
  {  // Deep and narrow: eight 3x3 convolutions of 8 filters, a pool after every second.
    TrainSpec s = BaseSpec("val-deep8-f8-in28c1-b32", Shape3{1, 28, 28}, 32, origin);
    for (int i = 0; i < 8; ++i) {
      s.layers.insert(s.layers.end(), {Conv(8, 3, 1, 1), relu});
      if (i % 2 == 1 && i < 6) s.layers.push_back(Pool(2));
    }
    s.layers.insert(s.layers.end(), {flatten, Dense(10)});
    add(s);
  }
  {  // MLP, deep and narrow: four hidden layers of 256.
    TrainSpec s = BaseSpec("val-mlp-784-256x4-b64", Shape3{1, 28, 28}, 64, origin);
    s.layers = {flatten};
    for (int i = 0; i < 4; ++i) s.layers.insert(s.layers.end(), {Dense(256), relu});
    s.layers.push_back(Dense(10));
    add(s);
  }
  {  // MLP, one wide hidden layer at a small batch.
    TrainSpec s = BaseSpec("val-mlp-784-4096-b32", Shape3{1, 28, 28}, 32, origin);
    s.layers = {flatten, Dense(4096), relu, Dense(10)};
    add(s);
  }
  {  // MLP on colour input at a large batch, with dropout between the hidden layers.
    TrainSpec s = BaseSpec("val-mlp-3072-512x2-b256", Shape3{3, 32, 32}, 256, origin);
    s.layers = {flatten, Dense(512), relu, Dropout(0.2), Dense(512), relu, Dense(10)};
    add(s);
  }
  {  // Large input: 112 px colour at batch 8, a 5x5 stride-2 stem and three pools.
    TrainSpec s = BaseSpec("val-large-in112c3-b8", Shape3{3, 112, 112}, 8, origin);
    s.layers = {Conv(16, 5, 2, 2), relu, Pool(2), Conv(32, 3, 1, 1), relu,     Pool(2),
                Conv(32, 3, 1, 1), relu, Pool(2), flatten,           Dense(10)};
    add(s);
  }
  {  // Large input: 96 px grey, a narrow first convolution, a 4x4 pool, batchnorm.
    TrainSpec s = BaseSpec("val-large-in96c1-b16", Shape3{1, 96, 96}, 16, origin);
    s.layers = {Conv(8, 3, 1, 1), bn,      relu,      Pool(4), Conv(16, 5, 1, 2), bn, relu,
                Pool(2),          flatten, Dense(64), relu,    Dense(10)};
    add(s);
  }
  {  // Mixed kernel sizes: 7x7, 5x5, 1x1 and 3x3, with an overlapping 3x3 stride-2 pool.
    TrainSpec s = BaseSpec("val-mixed-k7531-in32c3-b32", Shape3{3, 32, 32}, 32, origin);
    LayerSpec overlap = Pool(3);
    overlap.stride = 2;
    overlap.padding = 1;
    s.layers = {Conv(16, 7, 1, 3),
                relu,
                overlap,
                Conv(32, 5, 1, 2),
                relu,
                Pool(2),
                Conv(64, 1, 1, 0),
                relu,
                Conv(32, 3, 1, 1),
                relu,
                Pool(2),
                flatten,
                Dense(10)};
    add(s);
  }
  {  // Small batch: a batchnorm CNN with dropout between its dense layers, batch 4.
    TrainSpec s = BaseSpec("val-bn-cnn-in32c3-b4", Shape3{3, 32, 32}, 4, origin);
    s.layers = {Conv(32, 3, 1, 1), bn,         relu,     Pool(2),
                Conv(64, 3, 1, 1), bn,         relu,     Pool(2),
                flatten,           Dense(256), relu,     Dropout(0.5),
                Dense(128),        relu,       Dense(10)};
    add(s);
  }
  {  // Residual as ResNet's basic blocks: an identity block, then a stride-2 block whose
     // shortcut is a 1x1 stride-2 convolution with batchnorm, and global average pooling.
    TrainSpec s = BaseSpec("val-resnet-proj-in32c3-b32", Shape3{3, 32, 32}, 32, origin);
    LayerSpec identity = Simple(LayerKind::Residual), down = Simple(LayerKind::Residual);
    identity.layers = {Conv(16, 3, 1, 1), bn, relu, Conv(16, 3, 1, 1), bn};
    down.layers = {Conv(32, 3, 2, 1), bn, relu, Conv(32, 3, 1, 1), bn};
    down.shortcut = {Conv(32, 1, 2, 0), bn};
    s.layers = {Conv(16, 3, 1, 1),
                bn,
                relu,
                identity,
                relu,
                down,
                relu,
                Simple(LayerKind::GlobalAvgPool2d),
                flatten,
                Dense(10)};
    add(s);
  }
  {  // Residual MLP: two blocks of dense layers with identity shortcuts, GELU throughout.
    TrainSpec s = BaseSpec("val-resmlp-784-512x2-b64", Shape3{1, 28, 28}, 64, origin);
    const LayerSpec gelu = Simple(LayerKind::Gelu);
    LayerSpec block = Simple(LayerKind::Residual);
    block.layers = {Dense(512), gelu, Dense(512)};
    s.layers = {flatten, Dense(512), gelu, block, gelu, block, gelu, Dense(10)};
    add(s);
  }
  {  // Large batch: a small CNN on 16 px input at batch 512.
    TrainSpec s = BaseSpec("val-small-cnn-in16c1-b512", Shape3{1, 16, 16}, 512, origin);
    s.layers = {Conv(16, 3, 1, 1), relu,      Pool(2), Conv(32, 3, 1, 1), relu, Pool(2),
                flatten,           Dense(64), relu,    Dense(10)};
    add(s);
  }
  return out;
}

std::vector<SweepEntry> ValidationSet(const std::string& set, bool gpu) {
  std::vector<SweepEntry> out;
  if (set == "term" || set == "all") {
    out = gpu ? GpuValidationModels() : ValidationModels();
    if (gpu) {  // GpuValidationModels() ends with the judged ones: the term set is the rest
      const size_t judged = JudgedValidationModels().size();
      out.resize(out.size() - judged);
    }
  }
  if (set == "judged" || set == "all") {
    std::vector<SweepEntry> judged = JudgedValidationModels();
    out.insert(out.end(), judged.begin(), judged.end());
  }
  if (set != "term" && set != "judged" && set != "all")
    throw UsageError("--set: must be judged, term or all, got '" + set + "'");
  return out;
}

std::vector<SweepEntry> GpuValidationModels() {
  std::vector<SweepEntry> out = ValidationModels();
  const std::string origin = "validation models";
  const LayerSpec relu = Simple(LayerKind::Relu), flatten = Simple(LayerKind::Flatten),
                  bn = Simple(LayerKind::BatchNorm);
  // VGG-style stages at ResNet widths (64-512 filters, two 3x3 convs + batchnorm each) and
  // a wide classifier, on ImageNet-sized and on CIFAR-sized inputs.
  auto vgg = [&](const std::string& name, int side, int batch, const std::vector<int>& stages) {
    TrainSpec s = BaseSpec(name, Shape3{3, side, side}, batch, origin);
    for (int filters : stages) {
      for (int k = 0; k < 2; ++k)
        s.layers.insert(s.layers.end(), {Conv(filters, 3, 1, 1), bn, relu});
      s.layers.push_back(Pool(2));
    }
    s.layers.insert(s.layers.end(),
                    {flatten, Dense(1024), relu, Dropout(0.5), Dense(1024), relu, Dense(10)});
    out.push_back(EntryOf(std::move(s)));  // BaseSpec made the spec's batch `batch`
  };
  vgg("val-gpu-vgg-in224c3-b32", 224, 32, {64, 128, 256, 512, 512});
  vgg("val-gpu-vgg-in32c3-b256", 32, 256, {64, 128, 256, 512});
  {  // A wide MLP at a large batch: dense GEMMs alone.
    TrainSpec s = BaseSpec("val-gpu-mlp-3072-4096x3-b1024", Shape3{3, 32, 32}, 1024, origin);
    s.layers = {flatten, Dense(4096), relu, Dense(4096), relu, Dense(4096), relu, Dense(10)};
    out.push_back(EntryOf(std::move(s)));
  }
  // The judged models, last (ValidationSet relies on it): all small enough for any GPU.
  std::vector<SweepEntry> judged = JudgedValidationModels();
  out.insert(out.end(), judged.begin(), judged.end());
  return out;
}

}  // namespace dlh
