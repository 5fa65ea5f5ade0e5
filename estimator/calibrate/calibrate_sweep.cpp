// DLH estimator — the calibration sweep (systematically varied CNNs; the validation models
// are in validation_models.cpp). Pure spec construction: nothing here runs the engine.
//
// Every sweep model follows one pattern, so that the sweep varies a few factors cleanly:
//   per conv layer: conv2d(filters, kernel 3 or 5, "same" padding) [+ batchnorm] + relu
//                   [+ a residual block: conv2d [+ batchnorm] + relu + conv2d [+ batchnorm],
//                   the identity added, then relu], then maxpool2d(k2) while the image stays
//                   at least 4x4 after pooling (0 conv layers: an MLP)
//   flatten [+ dropout 0.25]; per FC layer: dense(nodes) + relu; dense(10)
// The full sweep is one-factor-at-a-time around a base model (2 conv, 32 filters, 1 FC of
// 256, 1x28x28, batch 64) plus a space-filling random set: candidates drawn with a fixed
// seed, kept when their predicted step time is inside a budget, then picked greedily by
// the maximum projection criterion in a normalised factor space (see AddSpaceFilling), then
// four models of 4-6 FC layers (FullFactors says why). The budget (predicted 4 ms .. 0.8 s)
// keeps every step between a few ms and about a second on a 2-core CPU, so the full sweep
// (80 models, 3 rounds) takes 1-2 minutes there; the quick one (22 small models) about 2 s.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/spec_builders.hpp"

namespace dlh {
namespace {

using spec_builders::BaseSpec;
using spec_builders::Conv;
using spec_builders::Dense;
using spec_builders::Dropout;
using spec_builders::kClasses;
using spec_builders::Pool;
using spec_builders::Simple;

struct Factors {
  int conv = 2;
  int filters = 32;
  int fc = 1;
  int nodes = 256;
  int size = 28;  // square input side
  int channels = 1;
  int batch = 64;
  int kernel = 3;
  int bn = 0;       // batchnorm after each conv
  int dropout = 0;  // dropout after flatten
  int res = 0;      // a residual block after each conv
};

std::string SweepName(const Factors& f) {
  char fc[32], buf[128];
  if (f.fc > 0)
    std::snprintf(fc, sizeof fc, "fc%dx%d", f.fc, f.nodes);
  else
    std::snprintf(fc, sizeof fc, "fc0");
  char kernel[8] = "";
  if (f.kernel != 3) std::snprintf(kernel, sizeof kernel, "k%d", f.kernel);
  std::snprintf(buf, sizeof buf, "conv%d%s-f%d-%s-in%dc%d-b%d%s%s%s", f.conv, kernel, f.filters, fc,
                f.size, f.channels, f.batch, f.bn ? "-bn" : "", f.dropout ? "-do" : "",
                f.res ? "-res" : "");
  return buf;
}

// Layers of the sweep pattern (see the top of this file).
std::vector<LayerSpec> SweepLayers(const Factors& f) {
  std::vector<LayerSpec> layers;
  int side = f.size;
  for (int i = 0; i < f.conv; ++i) {
    layers.push_back(Conv(f.filters, f.kernel, 1, f.kernel / 2));
    if (f.bn) layers.push_back(Simple(LayerKind::BatchNorm));
    layers.push_back(Simple(LayerKind::Relu));
    if (f.res) {
      LayerSpec block = Simple(LayerKind::Residual);
      for (int k = 0; k < 2; ++k) {
        block.layers.push_back(Conv(f.filters, f.kernel, 1, f.kernel / 2));
        if (f.bn) block.layers.push_back(Simple(LayerKind::BatchNorm));
        if (k == 0) block.layers.push_back(Simple(LayerKind::Relu));
      }
      layers.push_back(block);
      layers.push_back(Simple(LayerKind::Relu));
    }
    if (side / 2 >= 4) {
      layers.push_back(Pool(2));
      side /= 2;
    }
  }
  layers.push_back(Simple(LayerKind::Flatten));
  if (f.dropout) layers.push_back(Dropout(0.25));
  for (int i = 0; i < f.fc; ++i) {
    layers.push_back(Dense(f.nodes));
    layers.push_back(Simple(LayerKind::Relu));
  }
  layers.push_back(Dense(kClasses));
  return layers;
}

SweepEntry MakeSweepEntry(const Factors& f) {
  SweepEntry e;
  e.spec = BaseSpec(SweepName(f), Shape3{f.channels, f.size, f.size}, f.batch, "calibration sweep");
  e.spec.layers = SweepLayers(f);
  e.batch = f.batch;
  LayerShapes(e.spec);  // throws SpecError if the pattern ever produced a broken model
  return e;
}

// What one sample of a sweep model costs, roughly: FLOPs (forward + backward) and
// activation values written (all passes). Deliberately independent of features.cpp: the
// sweep must not move when the estimator's cost model changes.
struct Work {
  double flops = 0;
  double elements = 0;
  double params = 0;
  int layers = 0;      // conv, dense (each with its relu) and pool layers
  double columns = 0;  // the largest convolution's im2col matrix, values
};

Work SampleWork(const Factors& f) {
  Work w;
  double flops = 0;  // per sample, forward + backward
  double elements = double(f.channels) * f.size * f.size;
  int side = f.size, channels = f.channels;
  for (int i = 0; i < f.conv; ++i) {
    const double fwd = 2.0 * f.kernel * f.kernel * channels * f.filters * side * side;
    w.columns = std::max(w.columns, double(f.kernel) * f.kernel * channels * side * side);
    flops += fwd * (i == 0 ? 2 : 3);  // the first layer computes no input gradient
    elements += (2.0 + 2 * f.bn) * f.filters * side * side;  // conv (+ bn) + relu outputs
    channels = f.filters;
    if (f.res) {  // two convs, their relu and bn, the sum and its relu
      flops += 2 * 3 * 2.0 * f.kernel * f.kernel * f.filters * f.filters * side * side;
      elements += (5.0 + 2 * f.bn) * f.filters * side * side;
    }
    if (side / 2 >= 4) {
      side /= 2;
      elements += double(channels) * side * side;
    }
  }
  int in = channels * side * side;
  for (int i = 0; i < f.fc; ++i) {
    flops += 3 * 2.0 * in * f.nodes;
    elements += 2.0 * f.nodes;
    w.params += double(in) * f.nodes;
    in = f.nodes;
  }
  flops += 3 * 2.0 * in * kClasses;
  w.params += double(in) * kClasses +
              double(f.conv) * f.kernel * f.kernel * f.filters * std::max(f.channels, f.filters);
  w.flops = flops;
  w.elements = elements;
  w.layers = 2 * (f.conv + f.fc) + 1;
  return w;
}

// Rough step time on the reference 2-core CPU (OpenBLAS; rates fitted to a first run of
// the sweep there, within about 30%), used only to keep the random part of the sweep
// inside the budget.
double PredictedStepSeconds(const Factors& f) {
  const Work w = SampleWork(f);
  const double gemm_rate = 60e9;       // FLOP/s
  const double element_rate = 0.15e9;  // activation values per second (all passes)
  return 2e-4 + double(f.batch) * (w.flops / gemm_rate + w.elements / element_rate);
}

// SplitMix64: a tiny generator with the same output on every platform (the standard
// distributions are implementation-defined, which would change the sweep across
// compilers).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  template <typename T>
  T pick(const std::vector<T>& v) {
    return v[size_t(next() % v.size())];
  }
};

// The levels the random part of a sweep draws each factor from (ascending).
struct Levels {
  std::vector<int> convs, filters, fcs, nodes, sizes, channels, batches, kernels;
};

// The CPU sweep's (its models take a few ms to about a second on a 2-core CPU).
Levels CpuLevels() {
  return {{0, 1, 2, 3, 4},
          {8, 12, 16, 24, 32, 48, 64, 96, 128},
          {0, 1, 2},
          {64, 128, 256, 512, 1024, 2048},
          {16, 20, 24, 28, 32, 40, 48, 56, 64},
          {1, 3},
          {16, 24, 32, 48, 64, 96, 128, 192, 256},
          {3, 5}};
}

// Normalised coordinates for the space-filling criterion: log scale for sizes and counts that
// act multiplicatively, each factor spanning about [0, 1].
std::vector<double> Coordinates(const Factors& f, const Levels& l) {
  auto lg = [](double x, double lo, double hi) { return std::log(x / lo) / std::log(hi / lo); };
  return {f.conv / double(l.convs.back()),
          lg(f.filters, l.filters.front(), l.filters.back()),
          f.fc / double(l.fcs.back()),
          f.fc > 0 ? lg(f.nodes, l.nodes.front(), l.nodes.back()) : 0.0,
          lg(f.size, l.sizes.front(), l.sizes.back()),
          f.channels == 3 ? 1.0 : 0.0,
          lg(f.batch, l.batches.front(), l.batches.back()),
          f.kernel == 5 ? 1.0 : 0.0,
          double(f.bn),
          double(f.dropout),
          double(f.res)};
}

// Adds `count` random models to `chosen` (see the top of this file). The greedy pick uses
// the maximum projection criterion (each new point minimises sum_j 1 / prod_k d_jk^2 over
// the points picked before it): unlike plain maximin, which piles points into the corners
// of a 7-D cube, it also spreads the levels of every single factor. The one-factor points
// are left out of the criterion (they all share the base levels); duplicates are skipped.
// `fits` keeps a candidate inside the device's time (and memory) budget.
template <typename Fits>
void AddSpaceFilling(std::vector<Factors>* chosen, int count, uint64_t seed, const Levels& levels,
                     Fits fits) {
  SplitMix64 rng{seed};
  const Levels& l = levels;
  std::set<std::string> names;
  for (const Factors& f : *chosen) names.insert(SweepName(f));
  std::vector<Factors> pool;
  for (int i = 0; i < 4000 && pool.size() < 800; ++i) {
    Factors f;
    f.conv = rng.pick(l.convs);
    f.filters = rng.pick(l.filters);
    f.fc = rng.pick(l.fcs);
    f.nodes = rng.pick(l.nodes);
    f.size = rng.pick(l.sizes);
    f.channels = rng.pick(l.channels);
    f.batch = rng.pick(l.batches);
    f.kernel = rng.pick(l.kernels);
    f.bn = int(rng.next() % 2);
    f.dropout = int(rng.next() % 2);
    if (f.conv == 0 && f.fc == 0) f.fc = 1;  // an MLP needs a hidden layer to be one
    if (f.conv == 0) f.filters = 0, f.kernel = 3, f.bn = 0;
    if (f.fc == 0) f.nodes = 0;
    if (!fits(f) || !names.insert(SweepName(f)).second) continue;
    pool.push_back(f);
  }
  std::vector<std::vector<double>> coords;
  for (const Factors& f : pool) coords.push_back(Coordinates(f, levels));
  // Squared distances get a floor so that sharing a level (distance 0) costs a lot but
  // not infinitely: with 2-4 levels some sharing is unavoidable.
  const double floor2 = 0.01;
  std::vector<double> cost(pool.size(), 0.0);
  std::vector<bool> used(pool.size(), false);
  for (int k = 0; k < count; ++k) {
    size_t best = pool.size();
    for (size_t i = 0; i < pool.size(); ++i)
      if (!used[i] && (best == pool.size() || cost[i] < cost[best])) best = i;
    if (best == pool.size()) break;
    used[best] = true;
    chosen->push_back(pool[best]);
    for (size_t i = 0; i < pool.size(); ++i) {
      double prod = 1;
      for (size_t d = 0; d < coords[i].size(); ++d) {
        const double diff = coords[i][d] - coords[best][d];
        prod *= diff * diff + floor2;
      }
      cost[i] += 1 / prod;
    }
  }
}

// The base model with one factor changed for each of `values`.
template <typename Set>
void Vary(std::vector<Factors>* out, const Factors& base, const std::vector<int>& values, Set set) {
  for (int v : values) {
    Factors f = base;
    set(f, v);
    out->push_back(f);
  }
}

std::vector<Factors> QuickFactors() {
  // Small base (each step a few ms) so that the whole quick sweep takes seconds; still
  // varies every factor, enough to fit the model (at least two samples per term).
  Factors base{2, 16, 1, 128, 16, 1, 32};
  std::vector<Factors> fs{base};
  Vary(&fs, base, {1, 3, 4}, [](Factors& f, int v) { f.conv = v; });
  Vary(&fs, base, {8, 32}, [](Factors& f, int v) { f.filters = v; });
  Vary(&fs, base, {0, 2}, [](Factors& f, int v) { f.fc = v; });
  Vary(&fs, base, {512, 1024}, [](Factors& f, int v) { f.nodes = v; });
  Vary(&fs, base, {24, 28}, [](Factors& f, int v) { f.size = v; });
  Vary(&fs, base, {3}, [](Factors& f, int v) { f.channels = v; });
  Vary(&fs, base, {16, 64, 128}, [](Factors& f, int v) { f.batch = v; });
  // A few mixed corners decorrelate the terms (dense-heavy small-batch, conv-heavy).
  fs.push_back(Factors{1, 8, 2, 1024, 16, 1, 16});
  fs.push_back(Factors{3, 32, 0, 0, 24, 3, 16});
  // And the per-sample convolution terms (c9, c10: 11 terms need 22 samples): 5x5 kernels,
  // wide layers on small images, many narrow layers.
  fs.push_back(Factors{2, 16, 1, 128, 16, 1, 32, 5});
  fs.push_back(Factors{2, 48, 1, 128, 16, 1, 16});
  fs.push_back(Factors{4, 8, 1, 128, 28, 1, 64});
  fs.push_back(Factors{1, 32, 1, 128, 24, 3, 48, 5});
  return fs;
}

std::vector<Factors> FullFactors() {
  const Factors base;  // 2 conv, 32 filters, 1 FC of 256, 1x28x28, batch 64
  std::vector<Factors> fs{base};
  Vary(&fs, base, {1, 3, 4}, [](Factors& f, int v) { f.conv = v; });
  Vary(&fs, base, {8, 16, 48, 64}, [](Factors& f, int v) { f.filters = v; });
  Vary(&fs, base, {0, 2}, [](Factors& f, int v) { f.fc = v; });
  Vary(&fs, base, {64, 128, 512, 1024}, [](Factors& f, int v) { f.nodes = v; });
  Vary(&fs, base, {16, 32, 48, 64}, [](Factors& f, int v) { f.size = v; });
  Vary(&fs, base, {28, 32}, [](Factors& f, int v) {
    f.channels = 3;
    f.size = v;
  });
  Vary(&fs, base, {16, 32, 128, 256}, [](Factors& f, int v) { f.batch = v; });
  // Beyond the base's neighbourhood: large kernels, wide layers, and plain MLPs, whose big
  // dense GEMMs run at a different rate than the small ones behind a conv stack.
  Vary(&fs, base, {5}, [](Factors& f, int v) { f.kernel = v; });
  Vary(&fs, base, {96, 128}, [](Factors& f, int v) { f.filters = v; });
  Vary(&fs, base, {2048}, [](Factors& f, int v) { f.nodes = v; });
  fs.push_back(Factors{0, 0, 2, 512, 28, 1, 128, 3});
  fs.push_back(Factors{0, 0, 1, 2048, 28, 1, 64, 3});
  fs.push_back(Factors{1, 96, 0, 0, 28, 1, 64, 5});
  // Batchnorm and dropout: element-wise passes that are not tied to a convolution's size.
  fs.push_back(Factors{2, 32, 1, 256, 28, 1, 64, 3, 1, 0});
  fs.push_back(Factors{2, 32, 1, 256, 28, 1, 64, 3, 0, 1});
  fs.push_back(Factors{3, 48, 1, 128, 32, 3, 32, 3, 1, 1});
  // Residual blocks (ResNet's basic block at each conv): convolutions back to back at one
  // size, the block's sum, and batchnorm inside the paths. Not in the quick sweep: its 18
  // models are the fewest that fit the 9 terms, and one more moved its cross-validation folds
  // into a rank-deficient one (dense_layer_s; tests/scripts/estimate_cli.sh).
  fs.push_back(Factors{2, 32, 1, 256, 28, 1, 64, 3, 0, 0, 1});
  fs.push_back(Factors{2, 32, 1, 256, 28, 1, 64, 3, 1, 0, 1});
  fs.push_back(Factors{1, 16, 1, 128, 32, 3, 64, 3, 1, 0, 1});
  fs.push_back(Factors{3, 24, 0, 0, 32, 3, 32, 3, 1, 0, 1});
  for (Factors& f : fs)
    if (f.fc == 0) f.nodes = 0;
  AddSpaceFilling(&fs, 76 - int(fs.size()), 0x444c4843414c31ull, CpuLevels(), [](const Factors& f) {
    const double t = PredictedStepSeconds(f);
    return !(t < 4e-3 || t > 0.8);
  });
  // Deep MLPs and a conv stack with a deep dense head (4-6 hidden layers): the models above
  // have at most 3 dense layers, the classifier always among them, so a dense layer's fixed
  // cost (dense_layer_s) could not be told from the step's (it fitted to 0, and MLPs of 4+
  // hidden layers ran 15-35% slower than predicted). After the space-filling part, which
  // they leave as it was: the first 76 models are those of the calibrations made before.
  fs.push_back(Factors{0, 0, 5, 128, 28, 1, 32, 3});
  fs.push_back(Factors{0, 0, 4, 512, 28, 1, 128, 3});
  fs.push_back(Factors{0, 0, 6, 256, 16, 1, 64, 3});
  fs.push_back(Factors{2, 16, 4, 128, 28, 1, 64, 3});
  return fs;
}

// ---------------------------------------------------------------- GPU sweep
// The same pattern at GPU sizes: a CPU-sized model keeps a GPU busy for microseconds, and the
// fixed per-layer cost (kernel launches) would swamp what the model should learn.

// Rough step time on an A100/H100-class GPU (FP32 cuBLAS/cuDNN, launch overhead per layer),
// and the training memory, only to keep the random part inside the budget.
double GpuPredictedStepSeconds(const Factors& f) {
  const Work w = SampleWork(f);
  const double gemm_rate = 20e12;    // FLOP/s
  const double element_rate = 40e9;  // activation values per second (all passes)
  return 3e-4 + 3 * 2e-5 * w.layers +
         double(f.batch) * (w.flops / gemm_rate + w.elements / element_rate);
}

// Activations and their gradients, the largest convolution's column workspace,
// parameters with gradients and two optimizer slots: on the high side, as the estimator's
// TrainingMemoryBytes.
double GpuMemoryBytes(const Factors& f) {
  const Work w = SampleWork(f);
  return 4.0 * (double(f.batch) * (3.0 * w.elements + w.columns) + 4.0 * w.params);
}

// Inside 1 ms .. 1 s predicted, and 16 GiB by that count.
bool FitsGpuBudget(const Factors& f) {
  const double t = GpuPredictedStepSeconds(f);
  return t >= 1e-3 && t <= 1.0 && GpuMemoryBytes(f) <= 16.0 * (1ull << 30);
}

Levels GpuLevels() {
  return {{0, 1, 2, 3, 4},
          {16, 32, 48, 64, 96, 128, 192, 256, 384, 512},
          {0, 1, 2},
          {256, 512, 1024, 2048, 4096},
          {32, 48, 64, 96, 128, 160, 192, 224},
          {1, 3},
          {64, 96, 128, 192, 256, 384, 512, 768, 1024},
          {3, 5}};
}

std::vector<Factors> GpuQuickFactors() {
  Factors base{2, 64, 1, 512, 32, 3, 128};
  std::vector<Factors> fs{base};
  Vary(&fs, base, {1, 3}, [](Factors& f, int v) { f.conv = v; });
  Vary(&fs, base, {32, 128}, [](Factors& f, int v) { f.filters = v; });
  Vary(&fs, base, {0, 2}, [](Factors& f, int v) { f.fc = v; });
  Vary(&fs, base, {2048}, [](Factors& f, int v) { f.nodes = v; });
  Vary(&fs, base, {64}, [](Factors& f, int v) { f.size = v; });
  Vary(&fs, base, {1}, [](Factors& f, int v) { f.channels = v; });
  Vary(&fs, base, {64, 512}, [](Factors& f, int v) { f.batch = v; });
  fs.push_back(Factors{2, 32, 0, 0, 224, 3, 64});    // ImageNet-sized input
  fs.push_back(Factors{0, 0, 2, 2048, 32, 1, 256});  // MLP
  fs.push_back(Factors{1, 256, 1, 1024, 64, 3, 64, 5});
  // Small models, whose steps are the per-layer costs: a deep narrow CNN, a one-layer CNN,
  // a small MLP and a two-layer CNN on colour input. 19 models: one that does not fit a
  // GPU's memory still leaves the 18 that the 9 terms need.
  fs.push_back(Factors{4, 32, 1, 256, 40, 1, 64});
  fs.push_back(Factors{1, 16, 1, 256, 40, 1, 64});
  fs.push_back(Factors{0, 0, 2, 1024, 40, 1, 128});
  fs.push_back(Factors{2, 32, 2, 512, 40, 3, 64});
  return fs;
}

std::vector<Factors> GpuFullFactors() {
  const Factors base{3, 128, 1, 1024, 64, 3, 256};
  std::vector<Factors> fs{base};
  Vary(&fs, base, {1, 2, 4}, [](Factors& f, int v) { f.conv = v; });
  Vary(&fs, base, {32, 64, 256, 512}, [](Factors& f, int v) { f.filters = v; });
  Vary(&fs, base, {0, 2}, [](Factors& f, int v) { f.fc = v; });
  Vary(&fs, base, {256, 2048, 4096}, [](Factors& f, int v) { f.nodes = v; });
  Vary(&fs, base, {32, 96, 128}, [](Factors& f, int v) { f.size = v; });
  Vary(&fs, base, {1}, [](Factors& f, int v) { f.channels = v; });
  Vary(&fs, base, {64, 128, 512, 1024}, [](Factors& f, int v) { f.batch = v; });
  Vary(&fs, base, {5}, [](Factors& f, int v) { f.kernel = v; });
  // 224 px inputs at the batches that fit, plain MLPs (large GEMMs without convolutions),
  // and batchnorm and dropout, element-wise passes not tied to a convolution's size.
  fs.push_back(Factors{2, 64, 1, 1024, 224, 3, 128});
  fs.push_back(Factors{4, 32, 1, 512, 224, 3, 64});
  fs.push_back(Factors{1, 16, 1, 256, 224, 1, 256});
  fs.push_back(Factors{0, 0, 2, 4096, 64, 3, 512});
  fs.push_back(Factors{0, 0, 1, 2048, 32, 1, 1024});
  fs.push_back(Factors{3, 128, 1, 1024, 64, 3, 256, 3, 1, 0});
  fs.push_back(Factors{3, 128, 1, 1024, 64, 3, 256, 3, 0, 1});
  fs.push_back(Factors{2, 256, 2, 2048, 96, 3, 128, 3, 1, 1});
  // Small models: their steps are mostly the fixed cost of each layer, the per-layer terms
  // (on an H100 about 0.33 ms per convolution layer), which the budget's 1 ms floor below
  // would leave out of the random part.
  fs.push_back(Factors{1, 32, 1, 256, 40, 1, 64});
  fs.push_back(Factors{4, 32, 1, 256, 40, 1, 64});
  fs.push_back(Factors{4, 64, 2, 512, 40, 3, 64, 3, 1, 0});
  fs.push_back(Factors{2, 16, 0, 0, 40, 1, 64});
  fs.push_back(Factors{0, 0, 1, 1024, 40, 1, 128});
  fs.push_back(Factors{0, 0, 3, 512, 40, 1, 64});
  for (Factors& f : fs)
    if (f.fc == 0) f.nodes = 0;
  AddSpaceFilling(&fs, 96 - int(fs.size()), 0x444c4847505531ull, GpuLevels(), FitsGpuBudget);
  return fs;
}

std::vector<SweepEntry> Entries(std::vector<Factors> fs) {
  std::vector<SweepEntry> out;
  for (Factors& f : fs) {
    if (f.fc == 0) f.nodes = 0;
    out.push_back(MakeSweepEntry(f));
  }
  return out;
}

}  // namespace

std::vector<SweepEntry> GpuCalibrationSweep(bool quick) {
  return Entries(quick ? GpuQuickFactors() : GpuFullFactors());
}

std::vector<SweepEntry> CalibrationSweep(bool quick) {
  std::vector<SweepEntry> out;
  for (Factors& f : quick ? QuickFactors() : FullFactors()) {
    if (f.fc == 0) f.nodes = 0;
    out.push_back(MakeSweepEntry(f));
  }
  return out;
}

}  // namespace dlh
