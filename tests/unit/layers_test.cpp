// DLH — unit tests of the CPU layers (launcher/nn/layers/) and the softmax cross-entropy.
//
// Gradients are checked against central finite differences of the scalar loss
// L = sum(out * R) for a fixed random R: backward with grad_out = R must give dL/dIn and
// dL/dParam. Layers are fp32, so the tolerance is a norm-based relative error of 1e-2,
// and inputs of ReLU and max pooling are kept away from kinks and ties.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/nn/layers/conv_tiles.hpp"

namespace dlh {
namespace {

constexpr double kTolerance = 1e-2;

Tensor Uniform(std::vector<int> shape, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t) v = dist(rng);
  return t;
}

// Magnitudes in [0.2, 1] with random signs: no value near ReLU's kink at 0.
Tensor AwayFromZero(std::vector<int> shape, std::mt19937_64& rng) {
  Tensor t = Uniform(std::move(shape), rng, 0.2f, 1.0f);
  std::bernoulli_distribution sign(0.5);
  for (float& v : t) v = sign(rng) ? v : -v;
  return t;
}

// A shuffled ladder of values 0.05 apart: every pooling window has a clear winner.
Tensor Distinct(std::vector<int> shape, std::mt19937_64& rng) {
  Tensor t(std::move(shape));
  std::vector<int> order(t.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < t.size(); ++i) t[i] = 0.05f * float(order[i]) - 2.0f;
  return t;
}

ForwardContext TrainingContext() {
  ForwardContext ctx;
  ctx.training = true;
  ctx.seed = 1234;
  ctx.step = 17;
  ctx.rank = 1;
  ctx.layer_index = 3;
  return ctx;
}

double Dot(const Tensor& a, const Tensor& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

double Norm(const std::vector<double>& v) {
  double s = 0.0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// ||numeric - analytic|| / max(||numeric||, ||analytic||).
double RelativeError(const std::vector<double>& numeric, const std::vector<double>& analytic) {
  std::vector<double> diff(numeric.size());
  for (size_t i = 0; i < numeric.size(); ++i) diff[i] = numeric[i] - analytic[i];
  const double scale = std::max(Norm(numeric), Norm(analytic));
  return scale > 0 ? Norm(diff) / scale : 0.0;
}

// Central differences of f() with respect to every element of `values`.
template <typename F>
std::vector<double> NumericGradient(Tensor& values, float eps, F f) {
  std::vector<double> grad(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float saved = values[i];
    values[i] = saved + eps;
    const double up_x = values[i];
    const double up = f();
    values[i] = saved - eps;
    const double down_x = values[i];
    const double down = f();
    values[i] = saved;
    grad[i] = (up - down) / (up_x - down_x);  // the perturbation as fp32 really made it
  }
  return grad;
}

std::vector<double> AsDouble(const Tensor& t) { return {t.begin(), t.end()}; }

// Checks dL/dIn and every dL/dParam of `layer` at input `x` against finite differences.
void CheckGradients(Layer& layer, Tensor x, const ForwardContext& ctx, float eps = 1e-2f) {
  std::mt19937_64 rng(99);
  Tensor out;
  layer.forward(x, out, ctx);
  const Tensor r = Uniform(out.shape(), rng);
  Tensor grad_in;
  layer.backward(x, out, r, &grad_in);
  ASSERT_EQ(grad_in.shape(), x.shape());
  std::vector<std::vector<double>> param_grads;
  for (const ParamRef& p : layer.params()) {
    ASSERT_EQ(p.grad->shape(), p.value->shape()) << p.name;
    param_grads.push_back(AsDouble(*p.grad));
  }

  auto loss = [&] {
    Tensor o;
    layer.forward(x, o, ctx);
    return Dot(o, r);
  };
  const std::vector<double> analytic_in = AsDouble(grad_in);
  ASSERT_GT(Norm(analytic_in), 0.0) << "input gradient is all zero: the check would be vacuous";
  const double err_in = RelativeError(NumericGradient(x, eps, loss), analytic_in);
  EXPECT_LT(err_in, kTolerance) << "input gradient";

  std::vector<ParamRef> params = layer.params();
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_GT(Norm(param_grads[k]), 0.0) << params[k].name;
    const double err = RelativeError(NumericGradient(*params[k].value, eps, loss), param_grads[k]);
    EXPECT_LT(err, kTolerance) << params[k].name << " gradient";
  }
}

std::unique_ptr<Layer> Conv(const Shape3& in, int filters, int kernel, int stride, int padding) {
  LayerSpec spec;
  spec.kind = LayerKind::Conv2d;
  spec.filters = filters;
  spec.kernel = kernel;
  spec.stride = stride;
  spec.padding = padding;
  return MakeLayer(spec, in);
}

std::unique_ptr<Layer> Pool(const Shape3& in, int kernel, int stride, int padding) {
  LayerSpec spec;
  spec.kind = LayerKind::MaxPool2d;
  spec.kernel = kernel;
  spec.stride = stride;
  spec.padding = padding;
  return MakeLayer(spec, in);
}

std::unique_ptr<Layer> DenseLayer(const Shape3& in, int units) {
  LayerSpec spec;
  spec.kind = LayerKind::Dense;
  spec.units = units;
  return MakeLayer(spec, in);
}

std::unique_ptr<Layer> Simple(LayerKind kind, const Shape3& in) {
  LayerSpec spec;
  spec.kind = kind;
  return MakeLayer(spec, in);
}

std::unique_ptr<Layer> DropoutLayer(const Shape3& in, double rate) {
  LayerSpec spec;
  spec.kind = LayerKind::Dropout;
  spec.rate = rate;
  return MakeLayer(spec, in);
}

std::unique_ptr<Layer> BatchNormLayer(const Shape3& in, double momentum = 0.1) {
  LayerSpec spec;
  spec.kind = LayerKind::BatchNorm;
  spec.momentum = momentum;
  return MakeLayer(spec, in);
}

// Gives every parameter random values (biases and beta included, so that they matter).
void RandomizeParams(Layer& layer, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const ParamRef& p : layer.params()) {
    for (float& v : *p.value) v = dist(rng);
  }
}

// ---------------------------------------------------------------- conv2d

struct ConvCase {
  int kernel, stride, padding;
};

class ConvTest : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvTest, Gradients) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(1);
  const Shape3 in{2, 5, 6};  // H != W catches swapped axes
  auto layer = Conv(in, 3, c.kernel, c.stride, c.padding);
  RandomizeParams(*layer, rng);
  CheckGradients(*layer, Uniform({3, 2, 5, 6}, rng), TrainingContext());
}

// Direct convolution in double, straight from the definition.
TEST_P(ConvTest, ForwardMatchesDirectConvolution) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(2);
  const int N = 3, C = 2, H = 5, W = 6, F = 4, K = c.kernel, S = c.stride, P = c.padding;
  auto layer = Conv({C, H, W}, F, K, S, P);
  layer->init(rng);
  RandomizeParams(*layer, rng);
  const Tensor& w = *layer->params()[0].value;
  const Tensor& bias = *layer->params()[1].value;
  const Tensor x = Uniform({N, C, H, W}, rng);
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  const int Ho = (H + 2 * P - K) / S + 1, Wo = (W + 2 * P - K) / S + 1;
  ASSERT_EQ(out.shape(), (std::vector<int>{N, F, Ho, Wo}));
  EXPECT_EQ(layer->output_shape(), (Shape3{F, Ho, Wo}));
  for (int n = 0; n < N; ++n)
    for (int f = 0; f < F; ++f)
      for (int oh = 0; oh < Ho; ++oh)
        for (int ow = 0; ow < Wo; ++ow) {
          double s = bias[f];
          for (int ch = 0; ch < C; ++ch)
            for (int kh = 0; kh < K; ++kh)
              for (int kw = 0; kw < K; ++kw) {
                const int ih = oh * S - P + kh, iw = ow * S - P + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += double(w[((f * C + ch) * K + kh) * K + kw]) *
                     x[((n * C + ch) * H + ih) * W + iw];
              }
          EXPECT_NEAR(out[((n * F + f) * Ho + oh) * Wo + ow], s, 1e-5)
              << "n=" << n << " f=" << f << " oh=" << oh << " ow=" << ow;
        }
}

INSTANTIATE_TEST_SUITE_P(Layers, ConvTest,
                         ::testing::Values(ConvCase{3, 1, 0}, ConvCase{3, 1, 1}, ConvCase{3, 2, 0},
                                           ConvCase{3, 2, 1}, ConvCase{2, 1, 1}, ConvCase{1, 2, 0},
                                           // "same" size, stride 1: conv2d's shifted-plane path
                                           ConvCase{5, 1, 2}, ConvCase{1, 1, 0}),
                         [](const ::testing::TestParamInfo<ConvCase>& case_info) {
                           return "k" + std::to_string(case_info.param.kernel) + "s" +
                                  std::to_string(case_info.param.stride) + "p" +
                                  std::to_string(case_info.param.padding);
                         });

// A layer wide enough that conv2d.cpp cuts each sample's output into row tiles (three of
// 3, 3 and 1 rows on the shifted-plane path, two of 6 and 2 on the strided one): forward,
// input, weight and bias gradients against the definition, in double.
TEST(Conv2d, SeveralRowTilesMatchTheDefinition) {
  for (const ConvCase c : {ConvCase{3, 1, 1}, ConvCase{3, 2, 1}}) {
    std::mt19937_64 rng(4);
    const int N = 2, C = 64, H = c.stride == 1 ? 7 : 15, W = 33, F = 3, K = c.kernel;
    const int S = c.stride, P = c.padding;
    const int Ho = (H + 2 * P - K) / S + 1, Wo = (W + 2 * P - K) / S + 1;
    ASSERT_LT(ConvTileRows(C * K * K, Ho, Wo), Ho) << "one tile: the test would prove nothing";
    auto layer = Conv({C, H, W}, F, K, S, P);
    RandomizeParams(*layer, rng);
    const Tensor& w = *layer->params()[0].value;
    const Tensor& bias = *layer->params()[1].value;
    const Tensor x = Uniform({N, C, H, W}, rng);
    Tensor out, grad_in;
    layer->forward(x, out, TrainingContext());
    const Tensor g = Uniform(out.shape(), rng);
    layer->backward(x, out, g, &grad_in);
    std::vector<double> gx(x.size(), 0.0), gw(w.size(), 0.0), gb(F, 0.0);
    for (int n = 0; n < N; ++n)
      for (int f = 0; f < F; ++f)
        for (int oh = 0; oh < Ho; ++oh)
          for (int ow = 0; ow < Wo; ++ow) {
            const size_t o = ((size_t(n) * F + f) * Ho + oh) * Wo + ow;
            double y = bias[f];
            gb[f] += g[o];
            for (int ch = 0; ch < C; ++ch)
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw) {
                  const int ih = oh * S - P + kh, iw = ow * S - P + kw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const size_t wi = ((size_t(f) * C + ch) * K + kh) * K + kw;
                  const size_t xi = ((size_t(n) * C + ch) * H + ih) * W + iw;
                  y += double(w[wi]) * x[xi];
                  gw[wi] += double(g[o]) * x[xi];
                  gx[xi] += double(g[o]) * w[wi];
                }
            ASSERT_NEAR(out[o], y, 1e-4) << "n=" << n << " f=" << f << " oh=" << oh;
          }
    const Tensor& dw = *layer->params()[0].grad;
    const Tensor& db = *layer->params()[1].grad;
    for (size_t i = 0; i < gx.size(); ++i) ASSERT_NEAR(grad_in[i], gx[i], 1e-4) << "x " << i;
    for (size_t i = 0; i < gw.size(); ++i) ASSERT_NEAR(dw[i], gw[i], 1e-3) << "w " << i;
    for (int f = 0; f < F; ++f) ASSERT_NEAR(db[f], gb[size_t(f)], 1e-3) << "bias " << f;
  }
}

TEST(Conv2d, BackwardAfterEvaluationForwardStillUsesItsInput) {
  std::mt19937_64 rng(3);
  auto layer = Conv({2, 5, 5}, 3, 3, 1, 1);
  layer->init(rng);
  const Tensor x = Uniform({2, 2, 5, 5}, rng), other = Uniform({4, 2, 5, 5}, rng);
  Tensor out, g_in;
  layer->forward(x, out, TrainingContext());
  const Tensor r = Uniform(out.shape(), rng);
  layer->backward(x, out, r, &g_in);
  const Tensor expected = *layer->params()[0].grad;
  Tensor scratch;
  layer->forward(x, out, TrainingContext());
  layer->forward(other, scratch, ForwardContext{});  // evaluation in between
  layer->backward(x, out, r, &g_in);
  EXPECT_EQ(layer->params()[0].grad->to_vector(), expected.to_vector());
}

// ---------------------------------------------------------------- maxpool2d

TEST(MaxPool2d, GradientsKernel2Stride2) {
  std::mt19937_64 rng(4);
  auto layer = Pool({2, 6, 5}, 2, 2, 0);
  EXPECT_EQ(layer->output_shape(), (Shape3{2, 3, 2}));
  CheckGradients(*layer, Distinct({3, 2, 6, 5}, rng), TrainingContext());
}

TEST(MaxPool2d, GradientsKernel3Stride2Padding1) {
  std::mt19937_64 rng(5);
  auto layer = Pool({2, 5, 5}, 3, 2, 1);
  EXPECT_EQ(layer->output_shape(), (Shape3{2, 3, 3}));
  CheckGradients(*layer, Distinct({3, 2, 5, 5}, rng), TrainingContext());
}

// Naive max over each window clipped to the image, for both pooling configurations.
TEST(MaxPool2d, ForwardMatchesNaive) {
  std::mt19937_64 rng(21);
  for (const ConvCase c : {ConvCase{2, 2, 0}, ConvCase{3, 2, 1}, ConvCase{3, 1, 1}}) {
    const int N = 2, C = 3, H = 7, W = 6, K = c.kernel, S = c.stride, P = c.padding;
    auto layer = Pool({C, H, W}, K, S, P);
    const Tensor x = Uniform({N, C, H, W}, rng);
    Tensor out;
    layer->forward(x, out, ForwardContext{});
    const int Ho = (H + 2 * P - K) / S + 1, Wo = (W + 2 * P - K) / S + 1;
    ASSERT_EQ(out.shape(), (std::vector<int>{N, C, Ho, Wo}));
    for (int p = 0; p < N * C; ++p)
      for (int oh = 0; oh < Ho; ++oh)
        for (int ow = 0; ow < Wo; ++ow) {
          float best = -1e30f;
          for (int ih = oh * S - P; ih < oh * S - P + K; ++ih)
            for (int iw = ow * S - P; iw < ow * S - P + K; ++iw)
              if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                best = std::max(best, x[(p * H + ih) * W + iw]);
          EXPECT_EQ(out[(p * Ho + oh) * Wo + ow], best) << "k" << K << "s" << S << "p" << P;
        }
  }
}

TEST(MaxPool2d, PaddingNeverWins) {
  // All inputs negative: a zero from the padding would win every border window.
  auto layer = Pool({1, 2, 2}, 3, 2, 1);
  Tensor x({1, 1, 2, 2});
  x.assign({-4.0f, -3.0f, -2.0f, -1.0f});
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  ASSERT_EQ(out.shape(), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(out[0], -1.0f);
}

TEST(MaxPool2d, OverlappingWindowsAccumulateGradient) {
  auto layer = Pool({1, 3, 3}, 2, 1, 0);  // the centre wins all four windows
  Tensor x({1, 1, 3, 3});
  x.assign({0, 0, 0, 0, 9, 0, 0, 0, 0});
  Tensor out, g_in, g_out({1, 1, 2, 2});
  g_out.assign({1, 2, 3, 4});
  layer->forward(x, out, TrainingContext());
  layer->backward(x, out, g_out, &g_in);
  EXPECT_EQ(g_in.to_vector(), (std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
}

// ---------------------------------------------------------------- dense

TEST(Dense, GradientsFlatInput) {
  std::mt19937_64 rng(6);
  auto layer = DenseLayer({7, 1, 1}, 4);
  RandomizeParams(*layer, rng);
  CheckGradients(*layer, Uniform({3, 7}, rng), TrainingContext());
}

TEST(Dense, GradientsImageInputReadAsFlat) {
  std::mt19937_64 rng(7);
  auto layer = DenseLayer({2, 3, 2}, 5);
  RandomizeParams(*layer, rng);
  CheckGradients(*layer, Uniform({3, 2, 3, 2}, rng), TrainingContext());
}

TEST(Dense, ForwardMatchesNaive) {
  std::mt19937_64 rng(8);
  const int N = 4, I = 6, O = 3;
  auto layer = DenseLayer({I, 1, 1}, O);
  RandomizeParams(*layer, rng);
  const Tensor& w = *layer->params()[0].value;
  const Tensor& b = *layer->params()[1].value;
  ASSERT_EQ(w.shape(), (std::vector<int>{O, I}));
  const Tensor x = Uniform({N, I}, rng);
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  ASSERT_EQ(out.shape(), (std::vector<int>{N, O}));
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o) {
      double s = b[o];
      for (int i = 0; i < I; ++i) s += double(x[n * I + i]) * w[o * I + i];
      EXPECT_NEAR(out[n * O + o], s, 1e-5);
    }
}

// ---------------------------------------------------------------- relu, flatten

TEST(Relu, Gradients) {
  std::mt19937_64 rng(9);
  auto layer = Simple(LayerKind::Relu, {2, 5, 5});
  CheckGradients(*layer, AwayFromZero({3, 2, 5, 5}, rng), TrainingContext());
}

TEST(Relu, Forward) {
  auto layer = Simple(LayerKind::Relu, {4, 1, 1});
  Tensor x({1, 4}), out;
  x.assign({-1.5f, 0.0f, 2.0f, -0.0f});
  layer->forward(x, out, ForwardContext{});
  EXPECT_EQ(out.to_vector(), (std::vector<float>{0, 0, 2, 0}));
}

TEST(Flatten, GradientsAndShape) {
  std::mt19937_64 rng(10);
  auto layer = Simple(LayerKind::Flatten, {2, 5, 5});
  EXPECT_EQ(layer->output_shape(), (Shape3{50, 1, 1}));
  const Tensor x = Uniform({3, 2, 5, 5}, rng);
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  EXPECT_EQ(out.shape(), (std::vector<int>{3, 50}));
  EXPECT_EQ(out.to_vector(), x.to_vector());
  CheckGradients(*layer, x, TrainingContext());
}

// ---------------------------------------------------------------- dropout

TEST(Dropout, GradientsInTraining) {
  std::mt19937_64 rng(11);
  auto layer = DropoutLayer({2, 5, 5}, 0.3);
  CheckGradients(*layer, Uniform({3, 2, 5, 5}, rng), TrainingContext());
}

std::vector<float> DropoutOutput(double rate, const ForwardContext& ctx, int n = 4) {
  auto layer = DropoutLayer({3, 8, 8}, rate);
  Tensor x({n, 3, 8, 8}), out;
  std::fill(x.begin(), x.end(), 1.0f);
  layer->forward(x, out, ctx);
  return out.to_vector();
}

TEST(Dropout, MaskIsAPureFunctionOfTheContext) {
  const ForwardContext ctx = TrainingContext();
  EXPECT_EQ(DropoutOutput(0.5, ctx), DropoutOutput(0.5, ctx));  // fresh layers, same mask
  for (int field = 0; field < 4; ++field) {
    ForwardContext other = ctx;
    if (field == 0) other.step += 1;
    if (field == 1) other.rank += 1;
    if (field == 2) other.layer_index += 1;
    if (field == 3) other.seed += 1;
    EXPECT_NE(DropoutOutput(0.5, ctx), DropoutOutput(0.5, other)) << "field " << field;
  }
  // The mask of element i does not depend on the batch size (pure function of i).
  const std::vector<float> small = DropoutOutput(0.5, ctx, 2), large = DropoutOutput(0.5, ctx, 5);
  EXPECT_TRUE(std::equal(small.begin(), small.end(), large.begin()));
}

TEST(Dropout, EvaluationIsIdentity) {
  std::mt19937_64 rng(12);
  auto layer = DropoutLayer({2, 5, 5}, 0.5);
  const Tensor x = Uniform({3, 2, 5, 5}, rng);
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  EXPECT_EQ(out.to_vector(), x.to_vector());
}

TEST(Dropout, KeptFractionAndScale) {
  const double rate = 0.3;
  ForwardContext ctx = TrainingContext();
  auto layer = DropoutLayer({1000, 1, 1}, rate);
  Tensor x({100, 1000}), out;
  std::fill(x.begin(), x.end(), 2.0f);
  layer->forward(x, out, ctx);
  size_t kept = 0;
  for (float v : out) {
    if (v != 0.0f) {
      ++kept;
      EXPECT_FLOAT_EQ(v, float(2.0 / (1.0 - rate)));
    }
  }
  // 100000 Bernoulli(0.7) draws: the standard deviation of the fraction is 0.0014.
  EXPECT_NEAR(double(kept) / out.size(), 1.0 - rate, 0.01);
}

// ---------------------------------------------------------------- batchnorm

TEST(BatchNorm, GradientsImageInput) {
  std::mt19937_64 rng(13);
  auto layer = BatchNormLayer({2, 5, 5});
  RandomizeParams(*layer, rng);
  CheckGradients(*layer, Uniform({3, 2, 5, 5}, rng), TrainingContext());
}

TEST(BatchNorm, GradientsFlatInput) {
  std::mt19937_64 rng(14);
  auto layer = BatchNormLayer({5, 1, 1});
  RandomizeParams(*layer, rng);
  CheckGradients(*layer, Uniform({6, 5}, rng), TrainingContext());
}

TEST(BatchNorm, TrainingForwardNormalisesWithBatchStatistics) {
  std::mt19937_64 rng(15);
  auto layer = BatchNormLayer({2, 3, 3});
  const Tensor x = Uniform({4, 2, 3, 3}, rng, 1.0f, 5.0f);
  Tensor out;
  layer->forward(x, out, TrainingContext());
  for (int c = 0; c < 2; ++c) {  // gamma 1, beta 0: every channel has mean 0, variance 1
    double s = 0, sq = 0;
    for (int n = 0; n < 4; ++n)
      for (int p = 0; p < 9; ++p) {
        const double v = out[(n * 2 + c) * 9 + p];
        s += v;
        sq += v * v;
      }
    EXPECT_NEAR(s / 36, 0.0, 1e-5);
    EXPECT_NEAR(sq / 36, 1.0, 1e-3);  // epsilon makes it slightly less than 1
  }
}

TEST(BatchNorm, CommitFoldsBatchStatisticsIntoRunningStatistics) {
  std::mt19937_64 rng(16);
  const double momentum = 0.25;
  auto layer = BatchNormLayer({2, 2, 2}, momentum);
  const std::vector<BufferRef> buffers = layer->buffers();
  ASSERT_EQ(buffers.size(), 2u);
  EXPECT_EQ(buffers[0].name, "running_mean");
  EXPECT_EQ(buffers[1].name, "running_var");
  Tensor& rmean = *buffers[0].value;
  Tensor& rvar = *buffers[1].value;
  EXPECT_EQ(rmean.to_vector(), (std::vector<float>{0, 0}));
  EXPECT_EQ(rvar.to_vector(), (std::vector<float>{1, 1}));

  const Tensor x = Uniform({3, 2, 2, 2}, rng, -2.0f, 3.0f);
  Tensor out;
  layer->forward(x, out, TrainingContext());
  // Forward only records the statistics.
  EXPECT_EQ(rmean.to_vector(), (std::vector<float>{0, 0}));
  EXPECT_EQ(rvar.to_vector(), (std::vector<float>{1, 1}));

  Tensor* stats = layer->batch_stats();
  ASSERT_NE(stats, nullptr);
  ASSERT_EQ(stats->size(), 4u);
  const int count = 3 * 4;
  for (int c = 0; c < 2; ++c) {
    double s = 0, sq = 0;
    for (int n = 0; n < 3; ++n)
      for (int p = 0; p < 4; ++p) s += x[(n * 2 + c) * 4 + p];
    const double mean = s / count;
    for (int n = 0; n < 3; ++n)
      for (int p = 0; p < 4; ++p) sq += std::pow(x[(n * 2 + c) * 4 + p] - mean, 2);
    EXPECT_NEAR((*stats)[c], mean, 1e-6);
    // Unbiased: the running variance takes it, as in PyTorch (normalisation uses sq / n).
    EXPECT_NEAR((*stats)[2 + c], sq / (count - 1), 1e-6);
  }

  // The trainer may replace the statistics (cross-rank average); commit uses them.
  (*stats)[0] = 0.5f;
  (*stats)[1] = -1.0f;
  (*stats)[2] = 2.0f;
  (*stats)[3] = 0.25f;
  layer->commit_batch_stats();
  EXPECT_NEAR(rmean[0], (1 - momentum) * 0 + momentum * 0.5, 1e-7);
  EXPECT_NEAR(rmean[1], (1 - momentum) * 0 + momentum * -1.0, 1e-7);
  EXPECT_NEAR(rvar[0], (1 - momentum) * 1 + momentum * 2.0, 1e-6);
  EXPECT_NEAR(rvar[1], (1 - momentum) * 1 + momentum * 0.25, 1e-6);

  // A second commit folds again from the new running values.
  const float m0 = rmean[0], v0 = rvar[0];
  layer->commit_batch_stats();
  EXPECT_NEAR(rmean[0], (1 - momentum) * m0 + momentum * 0.5, 1e-6);
  EXPECT_NEAR(rvar[0], (1 - momentum) * v0 + momentum * 2.0, 1e-6);
}

TEST(BatchNorm, EvaluationUsesRunningStatistics) {
  std::mt19937_64 rng(17);
  const double eps = 1e-5;
  auto layer = BatchNormLayer({2, 2, 2});
  RandomizeParams(*layer, rng);
  const std::vector<BufferRef> buffers = layer->buffers();
  buffers[0].value->assign({0.5f, -1.0f});
  buffers[1].value->assign({4.0f, 0.25f});
  const Tensor& gamma = *layer->params()[0].value;
  const Tensor& beta = *layer->params()[1].value;
  const Tensor x = Uniform({3, 2, 2, 2}, rng);
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 2; ++c)
      for (int p = 0; p < 4; ++p) {
        const int i = (n * 2 + c) * 4 + p;
        const double rm = (*buffers[0].value)[c], rv = (*buffers[1].value)[c];
        EXPECT_NEAR(out[i], gamma[c] * (x[i] - rm) / std::sqrt(rv + eps) + beta[c], 1e-5);
      }
}

// ---------------------------------------------------------------- loss

TEST(SoftmaxCrossEntropy, HandComputedValues) {
  Tensor logits({2, 2});
  logits.assign({0.0f, 0.0f, 3.0f, 1.0f});
  const int32_t labels[] = {0, 1};
  Tensor grad;
  int64_t correct = 5;  // added to, not overwritten
  const double loss = SoftmaxCrossEntropy(logits, labels, 0.5f, &grad, &correct);
  const double l1 = std::log(1.0 + std::exp(2.0));  // -log softmax([3,1])[1]
  EXPECT_NEAR(loss, std::log(2.0) + l1, 1e-6);
  EXPECT_EQ(correct, 5 + 1);  // sample 0 ties (argmax 0 == label), sample 1 is wrong
  const double p = 1.0 / (1.0 + std::exp(-2.0));
  EXPECT_NEAR(grad[0], (0.5 - 1) * 0.5, 1e-7);
  EXPECT_NEAR(grad[1], 0.5 * 0.5, 1e-7);
  EXPECT_NEAR(grad[2], p * 0.5, 1e-6);
  EXPECT_NEAR(grad[3], (1 - p - 1) * 0.5, 1e-6);
}

TEST(SoftmaxCrossEntropy, LargeLogitsAreStable) {
  Tensor logits({1, 3});
  logits.assign({1000.0f, 0.0f, -1000.0f});
  const int32_t label = 1;
  Tensor grad;
  int64_t correct = 0;
  const double loss = SoftmaxCrossEntropy(logits, &label, 1.0f, &grad, &correct);
  EXPECT_NEAR(loss, 1000.0, 1e-6);
  EXPECT_EQ(correct, 0);
  for (float g : grad) EXPECT_TRUE(std::isfinite(g));
  EXPECT_NEAR(grad[0], 1.0, 1e-6);
  EXPECT_NEAR(grad[1], -1.0, 1e-6);
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  std::mt19937_64 rng(18);
  Tensor logits = Uniform({4, 5}, rng, -3.0f, 3.0f);
  const int32_t labels[] = {0, 4, 2, 2};
  const float scale = 0.25f;
  Tensor grad;
  int64_t correct = 0;
  SoftmaxCrossEntropy(logits, labels, scale, &grad, &correct);
  const std::vector<double> numeric = NumericGradient(logits, 1e-2f, [&] {
    int64_t unused = 0;
    Tensor g;
    return scale * SoftmaxCrossEntropy(logits, labels, scale, &g, &unused);
  });
  EXPECT_LT(RelativeError(numeric, AsDouble(grad)), kTolerance);
}

TEST(SoftmaxCrossEntropy, LabelOutOfRangeThrows) {
  Tensor logits({2, 3});
  logits.zero();
  Tensor grad;
  int64_t correct = 0;
  const int32_t too_big[] = {0, 3};
  const int32_t negative[] = {-1, 0};
  EXPECT_THROW(SoftmaxCrossEntropy(logits, too_big, 1.0f, &grad, &correct), Error);
  EXPECT_THROW(SoftmaxCrossEntropy(logits, negative, 1.0f, &grad, &correct), Error);
  EXPECT_EQ(correct, 0);
}

// ---------------------------------------------------------------- contract details

TEST(Layers, ParameterNamesAndDecay) {
  auto conv = Conv({1, 4, 4}, 2, 3, 1, 1);
  auto params = conv->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "weight");
  EXPECT_TRUE(params[0].decay);
  EXPECT_EQ(params[0].value->shape(), (std::vector<int>{2, 1, 3, 3}));
  EXPECT_EQ(params[1].name, "bias");
  EXPECT_FALSE(params[1].decay);
  EXPECT_EQ(params[1].value->shape(), (std::vector<int>{2}));

  auto dense = DenseLayer({3, 2, 2}, 5);
  params = dense->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].value->shape(), (std::vector<int>{5, 12}));
  EXPECT_TRUE(params[0].decay);
  EXPECT_FALSE(params[1].decay);

  auto bn = BatchNormLayer({3, 2, 2});
  params = bn->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].name, "gamma");
  EXPECT_EQ(params[1].name, "beta");
  EXPECT_FALSE(params[0].decay);
  EXPECT_FALSE(params[1].decay);
  EXPECT_EQ(params[0].value->to_vector(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(params[1].value->to_vector(), (std::vector<float>{0, 0, 0}));

  for (LayerKind kind : {LayerKind::Relu, LayerKind::Flatten}) {
    EXPECT_TRUE(Simple(kind, {3, 2, 2})->params().empty());
  }
  EXPECT_EQ(Pool({3, 2, 2}, 2, 2, 0)->batch_stats(), nullptr);
}

TEST(Layers, InitIsDeterministicAndFollowsTheSpec) {
  // The default (PyTorch's): weights and biases U(-1/sqrt(fan_in), +), fan_in 8*3*3 = 72.
  auto a = Conv({8, 6, 6}, 64, 3, 1, 1), b = Conv({8, 6, 6}, 64, 3, 1, 1);
  std::mt19937_64 rng_a(42), rng_b(42), rng_c(43);
  a->init(rng_a);
  b->init(rng_b);
  EXPECT_EQ(a->params()[0].value->to_vector(), b->params()[0].value->to_vector());
  EXPECT_EQ(a->params()[1].value->to_vector(), b->params()[1].value->to_vector());
  b->init(rng_c);
  EXPECT_NE(a->params()[0].value->to_vector(), b->params()[0].value->to_vector());

  auto rms = [](const Tensor& t) {
    double sq = 0;
    for (float v : t) sq += double(v) * v;
    return std::sqrt(sq / double(t.size()));
  };
  auto max_abs = [](const Tensor& t) {
    float m = 0;
    for (float v : t) m = std::max(m, std::fabs(v));
    return m;
  };
  const Tensor& w = *a->params()[0].value;  // 4608 draws
  EXPECT_NEAR(rms(w), 1 / std::sqrt(3.0 * 72), 0.005);
  EXPECT_LE(max_abs(w), 1 / std::sqrt(72.0));
  EXPECT_LE(max_abs(*a->params()[1].value), 1 / std::sqrt(72.0));
  EXPECT_GT(max_abs(*a->params()[1].value), 0.0f);

  // A layer's own "init": He-normal over fan_in 500, zero bias.
  LayerSpec spec;
  spec.kind = LayerKind::Dense;
  spec.units = 20;
  spec.init = WeightInit::HeNormal;
  spec.bias_init = BiasInit::Zeros;
  auto d = MakeLayer(spec, {500, 1, 1});
  std::mt19937_64 rng_d(7);
  d->init(rng_d);
  EXPECT_NEAR(rms(*d->params()[0].value), std::sqrt(2.0 / 500), 0.003);
  EXPECT_EQ(d->params()[1].value->to_vector(), std::vector<float>(20, 0.0f));
}

// Backward overwrites parameter gradients, and grad_in == nullptr skips only dL/dIn.
TEST(Layers, GradientsAreOverwrittenAndInputGradientIsOptional) {
  std::mt19937_64 rng(19);
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(Conv({2, 5, 5}, 3, 3, 2, 1));
  layers.push_back(DenseLayer({2, 5, 5}, 4));
  layers.push_back(BatchNormLayer({2, 5, 5}));
  for (auto& layer : layers) {
    layer->init(rng);
    const Tensor x = Uniform({3, 2, 5, 5}, rng);
    Tensor out, g_in;
    layer->forward(x, out, TrainingContext());
    const Tensor r = Uniform(out.shape(), rng);
    layer->backward(x, out, r, &g_in);
    std::vector<std::vector<float>> first;
    for (const ParamRef& p : layer->params()) first.push_back(p.grad->to_vector());
    layer->backward(x, out, r, nullptr);
    std::vector<ParamRef> params = layer->params();
    for (size_t k = 0; k < params.size(); ++k) {
      EXPECT_EQ(params[k].grad->to_vector(), first[k]) << "layer kind " << int(layer->kind());
    }
  }
}

// A rank may get no samples (more ranks than the global batch): nothing may crash.
TEST(Layers, EmptyBatchIsHarmless) {
  std::mt19937_64 rng(20);
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(Conv({2, 4, 4}, 2, 3, 1, 1));
  layers.push_back(Pool({2, 4, 4}, 2, 2, 0));
  layers.push_back(DenseLayer({2, 4, 4}, 3));
  layers.push_back(Simple(LayerKind::Relu, {2, 4, 4}));
  layers.push_back(Simple(LayerKind::Flatten, {2, 4, 4}));
  layers.push_back(DropoutLayer({2, 4, 4}, 0.5));
  layers.push_back(BatchNormLayer({2, 4, 4}));
  for (auto& layer : layers) {
    layer->init(rng);
    Tensor x({0, 2, 4, 4}), out, g_in;
    layer->forward(x, out, TrainingContext());
    EXPECT_EQ(out.size(), 0u);
    layer->backward(x, out, out, &g_in);
    EXPECT_EQ(g_in.size(), 0u);
    for (const ParamRef& p : layer->params()) {
      EXPECT_EQ(p.grad->to_vector(), std::vector<float>(p.grad->size(), 0.0f)) << p.name;
    }
  }
}

// ---------------------------------------------------------------- MakeLayer

TEST(MakeLayer, OutputShapes) {
  EXPECT_EQ(Conv({1, 28, 28}, 32, 3, 1, 1)->output_shape(), (Shape3{32, 28, 28}));
  EXPECT_EQ(Conv({1, 28, 28}, 8, 3, 2, 1)->output_shape(), (Shape3{8, 14, 14}));
  EXPECT_EQ(Conv({3, 7, 9}, 4, 3, 2, 0)->output_shape(), (Shape3{4, 3, 4}));
  EXPECT_EQ(Pool({32, 28, 28}, 2, 2, 0)->output_shape(), (Shape3{32, 14, 14}));
  EXPECT_EQ(Pool({4, 7, 7}, 3, 2, 1)->output_shape(), (Shape3{4, 4, 4}));
  EXPECT_EQ(DenseLayer({64, 7, 7}, 128)->output_shape(), (Shape3{128, 1, 1}));
  EXPECT_EQ(Simple(LayerKind::Flatten, {64, 7, 7})->output_shape(), (Shape3{3136, 1, 1}));
  EXPECT_EQ(BatchNormLayer({10, 1, 1})->output_shape(), (Shape3{10, 1, 1}));
  EXPECT_EQ(DropoutLayer({3, 4, 5}, 0.5)->output_shape(), (Shape3{3, 4, 5}));
}

TEST(MakeLayer, RejectsBadConfigurations) {
  EXPECT_THROW(Conv({10, 1, 1}, 4, 3, 1, 0), SpecError);  // conv on a flat input
  EXPECT_THROW(Conv({1, 4, 4}, 4, 5, 1, 0), SpecError);   // kernel > input
  EXPECT_NO_THROW(Conv({1, 4, 4}, 4, 5, 1, 1));           // ... but fits once padded
  EXPECT_THROW(Conv({1, 4, 4}, 0, 3, 1, 0), SpecError);
  EXPECT_THROW(Conv({1, 4, 4}, 2, 3, 0, 0), SpecError);
  EXPECT_THROW(Conv({1, 4, 4}, 2, 3, 1, -1), SpecError);
  EXPECT_THROW(Pool({1, 4, 4}, 2, 2, 2), SpecError);  // padding-only windows
  EXPECT_THROW(Pool({1, 4, 4}, 0, 1, 0), SpecError);
  EXPECT_THROW(DenseLayer({4, 1, 1}, 0), SpecError);
  EXPECT_THROW(DropoutLayer({4, 1, 1}, 1.0), SpecError);
  EXPECT_THROW(DropoutLayer({4, 1, 1}, -0.1), SpecError);
  EXPECT_THROW(BatchNormLayer({4, 1, 1}, 1.5), SpecError);
  EXPECT_THROW(Simple(LayerKind::Relu, {0, 1, 1}), SpecError);
  try {
    Conv({10, 1, 1}, 4, 3, 1, 0);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kernel"), std::string::npos) << e.what();
  }
}

TEST(Layers, WrongInputShapeIsAnErrorNotACrash) {
  auto conv = Conv({2, 5, 5}, 3, 3, 1, 1);
  Tensor x({2, 3, 5, 5}), out;
  EXPECT_THROW(conv->forward(x, out, ForwardContext{}), Error);
}

// ---------------------------------------------------------------- avgpool2d, global

std::unique_ptr<Layer> AvgPool(const Shape3& in, int kernel, int stride, int padding) {
  LayerSpec spec;
  spec.kind = LayerKind::AvgPool2d;
  spec.kernel = kernel;
  spec.stride = stride;
  spec.padding = padding;
  return MakeLayer(spec, in);
}

TEST(AvgPool2d, GradientsKernel3Stride2Padding1) {
  std::mt19937_64 rng(31);
  auto layer = AvgPool({2, 5, 6}, 3, 2, 1);
  EXPECT_EQ(layer->output_shape(), (Shape3{2, 3, 3}));
  CheckGradients(*layer, Uniform({3, 2, 5, 6}, rng), TrainingContext());
}

// PyTorch's default (count_include_pad): a window over the padding still divides by K*K.
TEST(AvgPool2d, ForwardCountsThePaddingAsZeros) {
  std::mt19937_64 rng(32);
  for (const ConvCase c : {ConvCase{2, 2, 0}, ConvCase{3, 2, 1}, ConvCase{3, 1, 1}}) {
    const int N = 2, C = 3, H = 7, W = 6, K = c.kernel, S = c.stride, P = c.padding;
    auto layer = AvgPool({C, H, W}, K, S, P);
    const Tensor x = Uniform({N, C, H, W}, rng);
    Tensor out;
    layer->forward(x, out, ForwardContext{});
    const Shape3 o = layer->output_shape();
    for (int n = 0; n < N; ++n)
      for (int ch = 0; ch < C; ++ch)
        for (int oh = 0; oh < o.height; ++oh)
          for (int ow = 0; ow < o.width; ++ow) {
            double sum = 0;
            for (int i = 0; i < K; ++i)
              for (int j = 0; j < K; ++j) {
                const int h = oh * S - P + i, w = ow * S - P + j;
                if (h >= 0 && h < H && w >= 0 && w < W) sum += x[((n * C + ch) * H + h) * W + w];
              }
            EXPECT_NEAR(out[((n * C + ch) * o.height + oh) * o.width + ow], sum / (K * K), 1e-6)
                << "kernel " << K << " stride " << S << " padding " << P;
          }
  }
}

TEST(GlobalAvgPool2d, MeanOfEachPlaneAndItsGradients) {
  std::mt19937_64 rng(33);
  auto layer = Simple(LayerKind::GlobalAvgPool2d, {3, 4, 5});
  EXPECT_EQ(layer->output_shape(), (Shape3{3, 1, 1}));
  const Tensor x = Uniform({2, 3, 4, 5}, rng);
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  for (int p = 0; p < 6; ++p) {
    double sum = 0;
    for (int i = 0; i < 20; ++i) sum += x[p * 20 + i];
    EXPECT_NEAR(out[p], sum / 20, 1e-6);
  }
  CheckGradients(*layer, x, TrainingContext());
}

// ---------------------------------------------------------------- gelu, silu

TEST(Gelu, ValuesOfTheErfFormAndGradients) {
  std::mt19937_64 rng(34);
  auto layer = Simple(LayerKind::Gelu, {2, 3, 3});
  Tensor x({1, 2, 3, 3});
  x.zero();
  x[0] = 1.0f;
  x[1] = -1.0f;
  x[2] = 3.0f;
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  // torch.nn.GELU()(torch.tensor([1., -1., 3.]))
  EXPECT_NEAR(out[0], 0.8413447, 1e-6);
  EXPECT_NEAR(out[1], -0.1586553, 1e-6);
  EXPECT_NEAR(out[2], 2.9959502, 1e-6);
  EXPECT_EQ(out[3], 0.0f);
  CheckGradients(*layer, Uniform({2, 2, 3, 3}, rng, -3.0f, 3.0f), TrainingContext());
}

TEST(Silu, ValuesAndGradients) {
  std::mt19937_64 rng(35);
  auto layer = Simple(LayerKind::Silu, {4, 1, 1});
  Tensor x({1, 4});
  x[0] = 1.0f;
  x[1] = -1.0f;
  x[2] = 0.0f;
  x[3] = -20.0f;
  Tensor out;
  layer->forward(x, out, ForwardContext{});
  // torch.nn.SiLU()(torch.tensor([1., -1., 0., -20.]))
  EXPECT_NEAR(out[0], 0.7310586, 1e-6);
  EXPECT_NEAR(out[1], -0.2689414, 1e-6);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_NEAR(out[3], -4.122307e-08, 1e-12);
  CheckGradients(*layer, Uniform({3, 4}, rng, -4.0f, 4.0f), TrainingContext());
}

// ---------------------------------------------------------------- residual

LayerSpec ConvSpec(int filters, int kernel, int stride, int padding) {
  LayerSpec l;
  l.kind = LayerKind::Conv2d;
  l.filters = filters;
  l.kernel = kernel;
  l.stride = stride;
  l.padding = padding;
  return l;
}

LayerSpec KindSpec(LayerKind kind) {
  LayerSpec l;
  l.kind = kind;
  return l;
}

// A ResNet basic block: conv-bn-relu-conv-bn, and an identity or a projection shortcut
// (1x1 conv with the stride, and bn).
LayerSpec BasicBlock(int filters, int stride, bool projection) {
  LayerSpec b;
  b.kind = LayerKind::Residual;
  b.layers = {ConvSpec(filters, 3, stride, 1), KindSpec(LayerKind::BatchNorm),
              KindSpec(LayerKind::Relu), ConvSpec(filters, 3, 1, 1),
              KindSpec(LayerKind::BatchNorm)};
  if (projection) b.shortcut = {ConvSpec(filters, 1, stride, 0), KindSpec(LayerKind::BatchNorm)};
  return b;
}

// For the finite differences: a bias right before a batchnorm has no gradient at all (the
// batchnorm takes the mean out), which a relative error cannot judge. So these blocks have
// their batchnorm after a nonlinearity; BasicBlock's own wiring is checked against PyTorch
// (tests/scripts/torch_spec.sh).
LayerSpec CheckableBlock(int filters, int stride, bool projection) {
  LayerSpec b;
  b.kind = LayerKind::Residual;
  b.layers = {ConvSpec(filters, 3, stride, 1), KindSpec(LayerKind::Gelu),
              KindSpec(LayerKind::BatchNorm), ConvSpec(filters, 3, 1, 1)};
  if (projection) b.shortcut = {KindSpec(LayerKind::BatchNorm), ConvSpec(filters, 1, stride, 0)};
  return b;
}

TEST(Residual, IdentityShortcutGradients) {
  std::mt19937_64 rng(36);
  auto block = MakeLayer(CheckableBlock(3, 1, false), {3, 5, 4});
  EXPECT_EQ(block->output_shape(), (Shape3{3, 5, 4}));
  RandomizeParams(*block, rng);
  CheckGradients(*block, Uniform({2, 3, 5, 4}, rng), TrainingContext());
}

TEST(Residual, ProjectionShortcutGradients) {
  std::mt19937_64 rng(37);
  auto block = MakeLayer(CheckableBlock(4, 2, true), {2, 6, 5});
  EXPECT_EQ(block->output_shape(), (Shape3{4, 3, 3}));
  RandomizeParams(*block, rng);
  CheckGradients(*block, Uniform({3, 2, 6, 5}, rng), TrainingContext());
}

// Without parameters in a path, and a block inside a block.
TEST(Residual, NestedBlocksAndParameterlessPathsGradients) {
  std::mt19937_64 rng(38);
  LayerSpec outer;
  outer.kind = LayerKind::Residual;
  LayerSpec inner;
  inner.kind = LayerKind::Residual;
  inner.layers = {KindSpec(LayerKind::Gelu), ConvSpec(2, 3, 1, 1)};
  outer.layers = {inner, KindSpec(LayerKind::Silu)};
  outer.shortcut = {KindSpec(LayerKind::Gelu)};
  auto block = MakeLayer(outer, {2, 4, 4});
  RandomizeParams(*block, rng);
  CheckGradients(*block, Uniform({2, 2, 4, 4}, rng), TrainingContext());
}

TEST(Residual, OutputIsTheSumOfItsPaths) {
  std::mt19937_64 rng(39);
  const Shape3 in{2, 4, 4};
  LayerSpec main_only = ConvSpec(2, 3, 1, 1);
  LayerSpec block_spec;
  block_spec.kind = LayerKind::Residual;
  block_spec.layers = {main_only};
  auto residual = MakeLayer(block_spec, in);
  auto conv = MakeLayer(main_only, in);
  RandomizeParams(*residual, rng);
  for (size_t k = 0; k < conv->params().size(); ++k)
    conv->params()[k].value->assign(residual->params()[k].value->to_vector());
  const Tensor x = Uniform({2, 2, 4, 4}, rng);
  Tensor a, b;
  residual->forward(x, a, ForwardContext{});
  conv->forward(x, b, ForwardContext{});
  ASSERT_EQ(a.size(), x.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i] + x[i]);
}

TEST(Residual, NamesItsPathsParametersAndGathersTheirStatistics) {
  std::mt19937_64 rng(40);
  auto block = MakeLayer(BasicBlock(4, 2, true), {2, 6, 6});
  std::vector<std::string> names;
  for (const ParamRef& p : block->params()) names.push_back(p.name + (p.decay ? " decay" : ""));
  const std::vector<std::string> want = {
      "main.00.conv2d/weight decay",     "main.00.conv2d/bias",
      "main.01.batchnorm/gamma",         "main.01.batchnorm/beta",
      "main.03.conv2d/weight decay",     "main.03.conv2d/bias",
      "main.04.batchnorm/gamma",         "main.04.batchnorm/beta",
      "shortcut.00.conv2d/weight decay", "shortcut.00.conv2d/bias",
      "shortcut.01.batchnorm/gamma",     "shortcut.01.batchnorm/beta"};
  EXPECT_EQ(names, want);
  ASSERT_EQ(block->buffers().size(), 6u);
  EXPECT_EQ(block->buffers()[0].name, "main.01.batchnorm/running_mean");
  EXPECT_EQ(block->buffers()[5].name, "shortcut.01.batchnorm/running_var");

  // Three batchnorms of 4 channels: 3 x {mean[4], var[4]}, refreshed by each training forward.
  RandomizeParams(*block, rng);
  Tensor* stats = block->batch_stats();
  ASSERT_NE(stats, nullptr);
  ASSERT_EQ(stats->size(), 24u);
  Tensor out;
  block->forward(Uniform({3, 2, 6, 6}, rng), out, TrainingContext());
  const std::vector<float> seen = stats->to_vector();
  EXPECT_NE(seen[0], 0.0f);
  // A committed average reaches every batchnorm's running statistics: all means 1, all
  // variances 1, momentum 0.1 from (0, 1): running mean 0.1, running var 1.
  for (size_t i = 0; i < stats->size(); ++i) (*stats)[i] = 1.0f;
  block->commit_batch_stats();
  for (const BufferRef& b : block->buffers())
    for (float v : *b.value)
      EXPECT_FLOAT_EQ(v, b.name.find("running_mean") != std::string::npos ? 0.1f : 1.0f) << b.name;
}

TEST(Residual, RefusesPathsOfDifferentShapes) {
  LayerSpec b = BasicBlock(4, 2, false);  // stride 2 and 4 filters, but the identity shortcut
  EXPECT_THROW(MakeLayer(b, {2, 6, 6}), SpecError);
  b.layers.clear();
  EXPECT_THROW(MakeLayer(b, {2, 6, 6}), SpecError);
}

// ---------------------------------------------------------------- label smoothing

TEST(SoftmaxCrossEntropy, LabelSmoothingValuesAndGradient) {
  std::mt19937_64 rng(41);
  Tensor logits = Uniform({3, 4}, rng, -3.0f, 3.0f);
  const int32_t labels[] = {0, 3, 1};
  const double s = 0.1;
  // -sum_k q_k log p_k by hand, q = s/4 + (1 - s) on the label.
  double want = 0;
  for (int b = 0; b < 3; ++b) {
    double z_max = -1e30, sum = 0;
    for (int k = 0; k < 4; ++k) z_max = std::max(z_max, double(logits[b * 4 + k]));
    for (int k = 0; k < 4; ++k) sum += std::exp(logits[b * 4 + k] - z_max);
    for (int k = 0; k < 4; ++k) {
      const double log_p = logits[b * 4 + k] - z_max - std::log(sum);
      want -= (s / 4 + (k == labels[b] ? 1 - s : 0)) * log_p;
    }
  }
  Tensor grad;
  int64_t correct = 0;
  EXPECT_NEAR(SoftmaxCrossEntropy(logits, labels, 0.5f, &grad, &correct, s), want, 1e-9);
  const std::vector<double> numeric = NumericGradient(logits, 1e-2f, [&] {
    int64_t unused = 0;
    Tensor g;
    return 0.5 * SoftmaxCrossEntropy(logits, labels, 0.5f, &g, &unused, s);
  });
  EXPECT_LT(RelativeError(numeric, AsDouble(grad)), kTolerance);
  // The gradient of each sample sums to 0 (softmax and target both sum to 1).
  for (int b = 0; b < 3; ++b) {
    double row = 0;
    for (int k = 0; k < 4; ++k) row += grad[b * 4 + k];
    EXPECT_NEAR(row, 0.0, 1e-6);
  }
}

}  // namespace
}  // namespace dlh
