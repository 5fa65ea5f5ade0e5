// DLH — unit tests of the optimizers' exported state (launcher/nn/optimizer.hpp): what a
// checkpoint saves, and that a snapshot refills the previous one's arrays.

#include "launcher/nn/optimizer.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace dlh {
namespace {

// Two parameters with gradients, as a layer would own them.
struct TwoParams {
  Tensor w{{3, 4}}, gw{{3, 4}}, b{{4}}, gb{{4}};
  std::vector<NamedParam> params;
  TwoParams() {
    for (size_t i = 0; i < w.size(); ++i) {
      w.data()[i] = 0.1f * float(i);
      gw.data()[i] = 0.01f * float(i + 1);
    }
    for (size_t i = 0; i < b.size(); ++i) gb.data()[i] = -0.5f;
    params = {{"00.dense/weight", {"weight", &w, &gw, true}},
              {"00.dense/bias", {"bias", &b, &gb, false}}};
  }
};

OptimizerSpec Adam() {
  OptimizerSpec spec;
  spec.kind = OptimizerSpec::Kind::Adam;
  return spec;
}

TEST(OptimizerState, AdamExportsBothMomentsByNameInParameterOrder) {
  TwoParams p;
  auto opt = MakeOptimizer(Adam());
  std::vector<NamedArray> state;
  opt->export_state(p.params, &state);  // before any update: zeros of the right shapes
  ASSERT_EQ(state.size(), 4u);
  EXPECT_EQ(state[0].name, "00.dense/weight/m");
  EXPECT_EQ(state[1].name, "00.dense/weight/v");
  EXPECT_EQ(state[2].name, "00.dense/bias/m");
  EXPECT_EQ(state[3].name, "00.dense/bias/v");
  EXPECT_EQ(state[0].shape, (std::vector<int>{3, 4}));
  EXPECT_EQ(state[3].data, std::vector<float>(4, 0.0f));
  opt->update(p.params, 0.01, 0);
  opt->export_state(p.params, &state);
  // First step of Adam: m = (1 - beta1) g, v = (1 - beta2) g^2 (1 - beta2 in single
  // precision is 0.001 to 4 digits).
  EXPECT_NEAR(state[2].data[0], 0.1 * -0.5, 1e-6);
  EXPECT_NEAR(state[3].data[0], 0.001 * 0.25, 1e-7);
}

// A checkpoint snapshot refills the previous one: the same memory, not fresh pages.
TEST(OptimizerState, ExportRefillsTheArraysItIsGiven) {
  TwoParams p;
  auto opt = MakeOptimizer(Adam());
  opt->update(p.params, 0.01, 0);
  std::vector<NamedArray> state;
  opt->export_state(p.params, &state);
  std::vector<const float*> where;
  for (const NamedArray& a : state) where.push_back(a.data.data());
  opt->update(p.params, 0.01, 1);
  opt->export_state(p.params, &state);
  ASSERT_EQ(state.size(), where.size());
  for (size_t i = 0; i < state.size(); ++i) EXPECT_EQ(state[i].data.data(), where[i]) << i;

  // What was refilled is the live state: a fresh optimizer given it continues identically.
  auto restored = MakeOptimizer(Adam());
  restored->import_state(p.params, state);
  TwoParams q;
  q.w = p.w;
  q.b = p.b;
  opt->update(p.params, 0.01, 2);
  restored->update(q.params, 0.01, 2);
  EXPECT_EQ(p.w.to_vector(), q.w.to_vector());
  EXPECT_EQ(p.b.to_vector(), q.b.to_vector());
}

TEST(OptimizerState, SgdWithoutMomentumHasNoStateAndClearsAStaleOne) {
  TwoParams p;
  OptimizerSpec spec;  // SGD, momentum 0
  auto opt = MakeOptimizer(spec);
  std::vector<NamedArray> state(3);
  opt->export_state(p.params, &state);
  EXPECT_TRUE(state.empty());
  spec.momentum = 0.9;
  auto with_momentum = MakeOptimizer(spec);
  with_momentum->export_state(p.params, &state);
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[0].name, "00.dense/weight/momentum");
}

}  // namespace
}  // namespace dlh
