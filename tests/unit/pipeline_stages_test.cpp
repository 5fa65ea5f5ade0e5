// DLH — unit tests of a pipeline's stages (common/pipeline_stages.hpp, the stage
// constructor of launcher/nn/network.hpp): where the cut falls, and that the stages' arrays
// are the whole network's, with the same names and initial values, and that the stages run
// one after the other compute what the whole network computes.
#include "common/pipeline_stages.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/nn/network.hpp"

namespace dlh {
namespace {

TrainSpec Spec() {
  return ParseSpec(R"({
    "input": {"channels": 1, "height": 12, "width": 12}, "classes": 5,
    "layers": [
      {"type": "conv2d", "filters": 8, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "conv2d", "filters": 16, "kernel": 3, "padding": 1}, {"type": "relu"},
      {"type": "flatten"}, {"type": "dense", "units": 32}, {"type": "relu"},
      {"type": "dense", "units": 5}],
    "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9}, "batch_size": 8, "epochs": 1,
    "dataset": "data.h5"})",
                   "pipe.json", "");
}

double Work(const std::vector<double>& w, size_t a, size_t b) {
  double s = 0;
  for (size_t i = a; i < b; ++i) s += w[i];
  return s;
}

TEST(PipelineStages, WorkCountsMultiplyAddsOfConvolutionsAndDenseLayers) {
  const std::vector<double> w = LayerWork(Spec());
  ASSERT_EQ(w.size(), 9u);
  EXPECT_DOUBLE_EQ(w[0], 8.0 * 12 * 12 * 1 * 3 * 3);  // conv 1 -> 8 on 12x12
  EXPECT_DOUBLE_EQ(w[1], 8.0 * 12 * 12);              // relu: its output elements
  EXPECT_DOUBLE_EQ(w[3], 16.0 * 6 * 6 * 8 * 3 * 3);   // conv 8 -> 16 on 6x6
  EXPECT_DOUBLE_EQ(w[6], 16.0 * 6 * 6 * 32);          // dense 576 -> 32
}

// The cut is the one whose largest stage is least: checked against every cut there is.
TEST(PipelineStages, CutMakesTheLargestStageLeast) {
  const TrainSpec spec = Spec();
  const std::vector<double> w = LayerWork(spec);
  for (int p = 1; p <= 4; ++p) {
    const std::vector<size_t> b = StageBounds(spec, p);
    ASSERT_EQ(b.size(), size_t(p) + 1);
    EXPECT_EQ(b.front(), 0u);
    EXPECT_EQ(b.back(), w.size());
    double largest = 0;
    for (int s = 0; s < p; ++s) {
      EXPECT_LT(b[s], b[s + 1]) << "stage " << s << " of " << p << " is empty";
      largest = std::max(largest, Work(w, b[s], b[s + 1]));
    }
    // Every cut of 9 layers into p stages, by brute force.
    double best = 1e300;
    std::vector<size_t> c(size_t(p) + 1, 0);
    c[size_t(p)] = w.size();
    std::function<void(int)> walk = [&](int s) {
      if (s == p) {
        double m = 0;
        for (int k = 0; k < p; ++k) m = std::max(m, Work(w, c[k], c[k + 1]));
        best = std::min(best, m);
        return;
      }
      for (size_t i = c[size_t(s) - 1] + 1; i + size_t(p - s) <= w.size(); ++i) {
        c[size_t(s)] = i;
        walk(s + 1);
      }
    };
    walk(1);
    EXPECT_DOUBLE_EQ(largest, best) << p << " stages";
  }
}

// Stage networks keep the whole network's names and initial values, and chained they compute
// its logits bit for bit.
TEST(PipelineStages, StagesTogetherAreTheWholeNetwork) {
  const TrainSpec spec = Spec();
  Network whole(spec);
  whole.init(7);
  const std::vector<size_t> b = StageBounds(spec, 3);
  std::vector<std::unique_ptr<Network>> stages;
  std::vector<NamedArray> params;
  for (int s = 0; s < 3; ++s) {
    stages.push_back(std::make_unique<Network>(spec, b[s], b[s + 1]));
    stages.back()->init(7);
    for (NamedArray& a : stages.back()->export_params()) params.push_back(std::move(a));
  }
  const std::vector<NamedArray> want = whole.export_params();
  ASSERT_EQ(params.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(params[i].name, want[i].name);
    EXPECT_EQ(params[i].data, want[i].data) << want[i].name;
  }
  Tensor x({4, 1, 12, 12});
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17) / 17.0f - 0.5f;
  ForwardContext ctx;
  const Tensor& logits = whole.forward(x, ctx);
  std::vector<Tensor> held(3);
  const Tensor* in = &x;
  for (int s = 0; s < 3; ++s) {
    held[size_t(s)] = stages[size_t(s)]->forward(*in, ctx);
    in = &held[size_t(s)];
  }
  ASSERT_EQ(in->shape(), logits.shape());
  EXPECT_EQ(std::memcmp(in->data(), logits.data(), logits.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace dlh
