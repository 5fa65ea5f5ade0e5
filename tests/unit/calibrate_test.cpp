// Tests of the calibration runner: the sweep and validation models, timing real training
// steps and the CPU description (the RAPL reader it uses: energy_test.cpp).
#include "estimator/calibrate/calibrate.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/spec.hpp"
#include "tests/util/temp_dir.hpp"

namespace dlh {
namespace {

namespace fs = std::filesystem;

bool SameLayer(const LayerSpec& a, const LayerSpec& b) {
  return a.kind == b.kind && a.filters == b.filters && a.kernel == b.kernel &&
         a.stride == b.stride && a.padding == b.padding && a.units == b.units && a.rate == b.rate &&
         a.momentum == b.momentum && a.epsilon == b.epsilon;
}

bool SameStructure(const TrainSpec& a, const TrainSpec& b) {
  if (!(a.input == b.input) || a.layers.size() != b.layers.size()) return false;
  for (size_t i = 0; i < a.layers.size(); ++i)
    if (!SameLayer(a.layers[i], b.layers[i])) return false;
  return true;
}

int Count(const TrainSpec& s, LayerKind kind) {
  int n = 0;
  for (const LayerSpec& l : s.layers) n += l.kind == kind;
  return n;
}

void ExpectValidEntries(const std::vector<SweepEntry>& entries) {
  std::set<std::string> names;
  for (const SweepEntry& e : entries) {
    SCOPED_TRACE(e.spec.name);
    EXPECT_FALSE(e.spec.name.empty());
    EXPECT_TRUE(names.insert(e.spec.name).second) << "duplicate name";
    EXPECT_NO_THROW(LayerShapes(e.spec));
    EXPECT_GT(e.batch, 0);
    EXPECT_EQ(e.batch, e.spec.batch_size);
    EXPECT_EQ(e.spec.classes, 10);
    EXPECT_EQ(e.spec.epochs, 1);
    EXPECT_FALSE(e.spec.origin.empty());
    EXPECT_EQ(e.spec.optimizer.kind, OptimizerSpec::Kind::Sgd);
    EXPECT_GT(e.spec.optimizer.momentum, 0);
  }
}

TEST(CalibrationSweep, EntriesAreValidWithDistinctNames) {
  const std::vector<SweepEntry> quick = CalibrationSweep(true), full = CalibrationSweep(false);
  EXPECT_GE(quick.size(), 12u);
  EXPECT_LE(quick.size(), 24u);
  EXPECT_GE(full.size(), 50u);
  EXPECT_LE(full.size(), 80u);
  ExpectValidEntries(quick);
  ExpectValidEntries(full);
  for (const SweepEntry& e : full) {
    EXPECT_EQ(e.spec.optimizer.lr, 0.01);
    EXPECT_EQ(e.spec.optimizer.momentum, 0.9);
    EXPECT_EQ(e.spec.seed, 1u);
    EXPECT_EQ(e.spec.origin, "calibration sweep");
  }
  // The base model of the brief is the first entry.
  EXPECT_EQ(full.front().spec.name, "conv2-f32-fc1x256-in28c1-b64");
}

TEST(CalibrationSweep, IsDeterministic) {
  const std::vector<SweepEntry> a = CalibrationSweep(false), b = CalibrationSweep(false);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].spec.name, b[i].spec.name);
    EXPECT_TRUE(SameStructure(a[i].spec, b[i].spec));
  }
}

// conv2d(k3 or k5, "same" padding) [+ bn] + relu [+ residual block + relu] [+ maxpool k2] per
// conv, flatten, (dense + relu) per
// FC, dense(10); models without convolution have at least one FC layer.
TEST(CalibrationSweep, FollowsThePattern) {
  for (bool quick : {true, false}) {
    for (const SweepEntry& e : CalibrationSweep(quick)) {
      SCOPED_TRACE(e.spec.name);
      const std::vector<LayerSpec>& ls = e.spec.layers;
      size_t i = 0;
      int convs = 0;
      while (i < ls.size() && ls[i].kind == LayerKind::Conv2d) {
        EXPECT_TRUE(ls[i].kernel == 3 || ls[i].kernel == 5);
        EXPECT_EQ(ls[i].padding, ls[i].kernel / 2);
        EXPECT_EQ(ls[i].stride, 1);
        ++i;
        if (i < ls.size() && ls[i].kind == LayerKind::BatchNorm) ++i;
        ASSERT_LT(i, ls.size());
        EXPECT_EQ(ls[i].kind, LayerKind::Relu);
        ++i;
        if (i < ls.size() && ls[i].kind == LayerKind::Residual) {
          // ResNet's basic block at the conv's size: conv [bn] relu conv [bn], then relu.
          const std::vector<LayerSpec>& path = ls[i].layers;
          EXPECT_TRUE(ls[i].shortcut.empty());
          ASSERT_GE(path.size(), 3u);
          EXPECT_EQ(path.front().kind, LayerKind::Conv2d);
          EXPECT_EQ(path.back().kind, ls[i - 2].kind == LayerKind::BatchNorm ? LayerKind::BatchNorm
                                                                             : LayerKind::Conv2d);
          EXPECT_EQ(path.front().filters,
                    ls[i - 2].kind == LayerKind::BatchNorm ? ls[i - 3].filters : ls[i - 2].filters);
          ++i;
          ASSERT_LT(i, ls.size());
          EXPECT_EQ(ls[i].kind, LayerKind::Relu);
          ++i;
        }
        if (i < ls.size() && ls[i].kind == LayerKind::MaxPool2d) {
          EXPECT_EQ(ls[i].kernel, 2);
          EXPECT_EQ(ls[i].stride, 2);
          ++i;
        }
        ++convs;
      }
      if (convs == 0) {
        EXPECT_GE(Count(e.spec, LayerKind::Dense), 2);
      }
      ASSERT_LT(i, ls.size());
      EXPECT_EQ(ls[i++].kind, LayerKind::Flatten);
      if (i < ls.size() && ls[i].kind == LayerKind::Dropout) ++i;
      while (i + 1 < ls.size()) {
        EXPECT_EQ(ls[i].kind, LayerKind::Dense);
        EXPECT_EQ(ls[i + 1].kind, LayerKind::Relu);
        i += 2;
      }
      ASSERT_EQ(i + 1, ls.size());
      EXPECT_EQ(ls[i].kind, LayerKind::Dense);
      EXPECT_EQ(ls[i].units, 10);
      // The image never shrinks below 4x4 through pooling.
      const std::vector<Shape3> shapes = LayerShapes(e.spec);
      for (size_t k = 0; k < ls.size(); ++k)
        if (ls[k].kind == LayerKind::MaxPool2d) {
          EXPECT_GE(shapes[k + 1].height, 4);
        }
    }
  }
}

TEST(CalibrationSweep, FullSweepVariesEveryFactor) {
  std::set<int> convs, filters, fcs, nodes, sizes, channels, batches, kernels;
  for (const SweepEntry& e : CalibrationSweep(false)) {
    const TrainSpec& s = e.spec;
    convs.insert(Count(s, LayerKind::Conv2d));
    fcs.insert(Count(s, LayerKind::Dense) - 1);
    for (const LayerSpec& l : s.layers) {
      if (l.kind == LayerKind::Conv2d) filters.insert(l.filters), kernels.insert(l.kernel);
      if (l.kind == LayerKind::Dense && l.units != 10) nodes.insert(l.units);
    }
    sizes.insert(s.input.height);
    channels.insert(s.input.channels);
    batches.insert(int(e.batch));
  }
  EXPECT_GE(convs.size(), 3u);
  EXPECT_GE(filters.size(), 3u);
  EXPECT_GE(fcs.size(), 3u);
  EXPECT_GE(nodes.size(), 3u);
  EXPECT_GE(sizes.size(), 3u);
  EXPECT_GE(channels.size(), 2u);
  EXPECT_GE(batches.size(), 3u);
  EXPECT_EQ(kernels, (std::set<int>{3, 5}));
  // The ranges of the header: conv 0-4, filters 8-128, FC 0-2 and the deep ones of 4-6,
  // nodes 64-2048, 16-64 px, batch 16-256.
  EXPECT_EQ(*convs.begin(), 0);
  EXPECT_EQ(*convs.rbegin(), 4);
  EXPECT_EQ(*filters.begin(), 8);
  EXPECT_EQ(*filters.rbegin(), 128);
  EXPECT_EQ(*fcs.begin(), 0);
  EXPECT_EQ(fcs, (std::set<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(*nodes.begin(), 64);
  EXPECT_EQ(*nodes.rbegin(), 2048);
  EXPECT_EQ(*sizes.begin(), 16);
  EXPECT_EQ(*sizes.rbegin(), 64);
  EXPECT_EQ(*batches.begin(), 16);
  EXPECT_EQ(*batches.rbegin(), 256);
}

TEST(ValidationModels, AreValidAndOutsideTheSweep) {
  const std::vector<SweepEntry> val = ValidationModels();
  EXPECT_GE(val.size(), 6u);
  ExpectValidEntries(val);
  std::vector<SweepEntry> sweep = CalibrationSweep(false);
  for (const SweepEntry& e : CalibrationSweep(true)) sweep.push_back(e);
  for (const SweepEntry& v : val) {
    for (const SweepEntry& s : sweep) {
      EXPECT_NE(v.spec.name, s.spec.name);
      EXPECT_FALSE(SameStructure(v.spec, s.spec)) << v.spec.name << " is " << s.spec.name;
    }
  }
  // What the sweep lacks, so the estimator has to generalise: strided convolution, dropout
  // between dense layers, layer orders the sweep's pattern never produces; also an MLP and
  // k5 convolutions of other shapes than the sweep's.
  int bn = 0, dropout = 0, strided = 0, mlp = 0, k5 = 0;
  for (const SweepEntry& v : val) {
    bn += Count(v.spec, LayerKind::BatchNorm) > 0;
    dropout += Count(v.spec, LayerKind::Dropout) > 0;
    mlp += Count(v.spec, LayerKind::Conv2d) == 0;
    for (const LayerSpec& l : v.spec.layers) {
      strided += l.kind == LayerKind::Conv2d && l.stride > 1;
      k5 += l.kind == LayerKind::Conv2d && l.kernel == 5;
    }
  }
  EXPECT_GT(bn, 0);
  EXPECT_GT(dropout, 0);
  EXPECT_GT(strided, 0);
  EXPECT_GT(mlp, 0);
  EXPECT_GT(k5, 0);
}

// Issue 40: the models that judge the time model are apart from those its terms were chosen
// on, and from the sweep, and they cover the shapes neither has.
TEST(JudgedValidationModels, AreApartFromTheSweepAndTheTermSet) {
  const std::vector<SweepEntry> judged = JudgedValidationModels();
  EXPECT_GE(judged.size(), 10u);
  ExpectValidEntries(judged);
  std::vector<SweepEntry> others = CalibrationSweep(false);
  for (auto more : {CalibrationSweep(true), GpuCalibrationSweep(false), GpuCalibrationSweep(true),
                    ValidationModels()})
    others.insert(others.end(), more.begin(), more.end());
  for (const SweepEntry& v : judged)
    for (const SweepEntry& s : others) {
      EXPECT_NE(v.spec.name, s.spec.name);
      EXPECT_FALSE(SameStructure(v.spec, s.spec)) << v.spec.name << " is " << s.spec.name;
    }
  int strided = 0, mlp = 0, large_input = 0, small_batch = 0, large_batch = 0, wide = 0, deep = 0;
  std::set<int> kernels;
  for (const SweepEntry& v : judged) {
    const int convs = Count(v.spec, LayerKind::Conv2d);
    mlp += convs == 0;
    deep += convs >= 6;
    large_input += v.spec.input.height >= 96;
    small_batch += v.batch <= 8;
    large_batch += v.batch >= 256;
    for (const LayerSpec& l : v.spec.layers) {
      strided += l.kind == LayerKind::Conv2d && l.stride > 1;
      wide += l.kind == LayerKind::Conv2d && l.filters >= 128;
      if (l.kind == LayerKind::Conv2d) kernels.insert(l.kernel);
    }
  }
  EXPECT_GE(strided, 2);
  EXPECT_GE(mlp, 3);
  EXPECT_GE(large_input, 2);
  EXPECT_GE(small_batch, 2);
  EXPECT_GE(large_batch, 2);
  EXPECT_GE(wide, 1);
  EXPECT_GE(deep, 1);
  EXPECT_EQ(kernels, (std::set<int>{1, 3, 5, 7}));
}

TEST(JudgedValidationModels, SetsByName) {
  const size_t term = ValidationModels().size(), judged = JudgedValidationModels().size();
  EXPECT_EQ(ValidationSet("term", false).size(), term);
  EXPECT_EQ(ValidationSet("judged", false).size(), judged);
  EXPECT_EQ(ValidationSet("all", false).size(), term + judged);
  EXPECT_EQ(ValidationSet("judged", true).size(), judged);
  EXPECT_EQ(ValidationSet("term", true).size() + judged, GpuValidationModels().size());
  for (const SweepEntry& e : ValidationSet("term", true))
    EXPECT_EQ(e.spec.origin, "validation models") << e.spec.name;
  EXPECT_THROW(ValidationSet("sweep", false), UsageError);
}

// The Fashion-MNIST example's layers (share/examples/fashion-mnist.json), parsed here so
// that the parser's defaults (maxpool stride = kernel) are compared too.
TEST(ValidationModels, IncludeTheFashionExample) {
  const TrainSpec example = ParseSpec(R"({
    "name": "fashion-cnn", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
    "layers": [
      {"type": "conv2d", "filters": 32, "kernel": 3, "stride": 1, "padding": 1},
      {"type": "batchnorm"}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
      {"type": "conv2d", "filters": 64, "kernel": 3, "stride": 1, "padding": 1},
      {"type": "batchnorm"}, {"type": "relu"}, {"type": "maxpool2d", "kernel": 2},
      {"type": "flatten"}, {"type": "dropout", "rate": 0.25}, {"type": "dense", "units": 128},
      {"type": "relu"}, {"type": "dropout", "rate": 0.3}, {"type": "dense", "units": 10}],
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "batch_size": 128, "epochs": 8, "seed": 1, "dataset": "fashion-mnist.h5"})",
                                      "fashion-mnist.json", "");
  int found = 0;
  for (const SweepEntry& v : ValidationModels())
    if (SameStructure(v.spec, example)) {
      ++found;
      EXPECT_EQ(v.batch, 128);
    }
  EXPECT_EQ(found, 1);
}

SweepEntry TinyEntry(int batch) {
  SweepEntry e = CalibrationSweep(true).front();  // conv2-f16-fc1x128-in16c1-b32
  e.batch = batch;
  e.spec.batch_size = batch;
  return e;
}

TEST(TimeTrainingStep, TimesATinyModel) {
  const SweepEntry e = TinyEntry(8);
  TimingOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.steps_per_repeat = 2;
  const TimingSample s = TimeTrainingStep(e, o);
  EXPECT_EQ(s.model, e.spec.name);
  EXPECT_EQ(s.batch, 8);
  EXPECT_GT(s.seconds, 0);
  EXPECT_LT(s.seconds, 5);
  EXPECT_TRUE(s.joules == -1 || s.joules > 0) << s.joules;
  EXPECT_GT(s.features.params, 0);
}

TEST(TimeTrainingStep, TimesModelsWithBatchnormAndDropout) {
  TimingOptions o;
  o.warmup = 0;
  o.repeats = 1;
  o.steps_per_repeat = 1;
  o.threads = 1;
  for (SweepEntry e : ValidationModels()) {
    if (Count(e.spec, LayerKind::BatchNorm) == 0 && Count(e.spec, LayerKind::Dropout) == 0)
      continue;
    e.batch = 4;  // keeps the test fast; the shapes are what matters here
    const TimingSample s = TimeTrainingStep(e, o);
    EXPECT_GT(s.seconds, 0) << e.spec.name;
  }
}

// The engine takes every judged shape (an overlapping padded pool, 1x1 and 7x7 kernels).
TEST(TimeTrainingStep, TimesEveryJudgedModel) {
  TimingOptions o;
  o.warmup = 0;
  o.repeats = 1;
  o.steps_per_repeat = 1;
  o.threads = 1;
  for (SweepEntry e : JudgedValidationModels()) {
    e.batch = 2;
    EXPECT_GT(TimeTrainingStep(e, o).seconds, 0) << e.spec.name;
  }
}

// Relational, not a timed assertion: 32x the batch of a conv model is far more work.
TEST(TimeTrainingStep, LargerBatchTakesLonger) {
  TimingOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.steps_per_repeat = 1;
  const TimingSample small = TimeTrainingStep(TinyEntry(8), o);
  const TimingSample large = TimeTrainingStep(TinyEntry(256), o);
  EXPECT_GT(large.seconds, small.seconds);
}

TEST(TimeTrainingStep, RejectsBadOptions) {
  const SweepEntry e = TinyEntry(4);
  TimingOptions o;
  o.repeats = 0;
  EXPECT_THROW(TimeTrainingStep(e, o), UsageError);
  o = TimingOptions();
  o.steps_per_repeat = 0;
  EXPECT_THROW(TimeTrainingStep(e, o), UsageError);
  o = TimingOptions();
  o.warmup = -1;
  EXPECT_THROW(TimeTrainingStep(e, o), UsageError);
  SweepEntry no_batch = e;
  no_batch.batch = 0;
  no_batch.spec.batch_size = 0;
  EXPECT_THROW(TimeTrainingStep(no_batch, TimingOptions()), EstimateError);
}

TEST(RunSweep, ReportsProgressAfterEachEntry) {
  std::vector<SweepEntry> entries{TinyEntry(2), TinyEntry(4)};
  entries[1].spec.name = "second";
  TimingOptions o;
  o.warmup = 0;
  o.repeats = 1;
  o.steps_per_repeat = 1;
  std::vector<size_t> done;
  const std::vector<TimingSample> samples =
      RunSweep(entries, o, [&](size_t d, size_t total, const TimingSample& s) {
        EXPECT_EQ(total, 2u);
        EXPECT_EQ(s.model, entries[d - 1].spec.name);
        done.push_back(d);
      });
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].model, "second");
  EXPECT_EQ(samples[1].batch, 4);
  EXPECT_EQ(done, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(RunSweep(entries, o, nullptr).size(), 2u);  // no progress callback
}

TEST(CpuDescription, NamesTheCpuAndCores) {
  const std::string d = CpuDescription();
  EXPECT_FALSE(d.empty());
  EXPECT_NE(d.find("core"), std::string::npos) << d;
}

}  // namespace
}  // namespace dlh
