// DLH — GELU and SiLU, element-wise over the engine's threads, in the exact forms PyTorch's
// nn.GELU() (erf, not the tanh approximation) and nn.SiLU() use. Each element is computed
// alone, so the values do not depend on the thread count.
//
//   gelu(x) = x * Phi(x),  Phi(x) = (1 + erf(x / sqrt 2)) / 2,
//   gelu'(x) = Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi)
//   silu(x) = x * s(x),    s(x) = 1 / (1 + exp(-x)),
//   silu'(x) = s(x) * (1 + x * (1 - s(x)))

#include <cmath>

#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

constexpr size_t kGrain = 16384;  // elements per block: erf and exp cost ~20 ns each
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// y[i] = f(x[i]) over the batch.
template <typename F>
void Map(const Tensor& in, Tensor& out, F f) {
  out.resize(in.shape());
  const float* x = in.data();
  float* y = out.data();
  ParallelRange(in.size(), kGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
}

// d[i] = g[i] * df(x[i]).
template <typename F>
void MapGrad(const Tensor& in, const Tensor& grad_out, Tensor* grad_in, F df) {
  grad_in->resize(in.shape());
  const float* x = in.data();
  const float* g = grad_out.data();
  float* d = grad_in->data();
  ParallelRange(in.size(), kGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) d[i] = g[i] * df(x[i]);
  });
}

}  // namespace

void Gelu::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  BatchSize(in, in_, "gelu");
  Map(in, out, [](float x) { return x * 0.5f * (1.0f + std::erf(x * kInvSqrt2)); });
}

void Gelu::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  MapGrad(in, grad_out, grad_in, [](float x) {
    return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * std::exp(-0.5f * x * x) * kInvSqrt2Pi;
  });
}

void Silu::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  BatchSize(in, in_, "silu");
  Map(in, out, [](float x) { return x * Sigmoid(x); });
}

void Silu::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  MapGrad(in, grad_out, grad_in, [](float x) {
    const float s = Sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  });
}

}  // namespace dlh
