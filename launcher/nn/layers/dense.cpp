// DLH — fully connected layer: out (N x units) = in (N x in_features) * W^T + b.
// Any input shape is accepted and read as flat features (NCHW is sample-major), so a
// dense layer may follow a conv or pool layer directly, without a flatten.

#include <algorithm>
#include <cmath>

#include "launcher/nn/layers/gemm.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {

Dense::Dense(const Shape3& in, int units, ParamInit init)
    : in_(in), in_features_(int(in.elements())), units_(units), param_init_(init) {
  weight_.resize({units, in_features_});
  grad_weight_.resize(weight_.shape());
  bias_.resize({units});
  grad_bias_.resize({units});
  weight_.zero();
  bias_.zero();
  grad_weight_.zero();
  grad_bias_.zero();
}

void Dense::init(std::mt19937_64& rng) {
  InitWeights(weight_.data(), weight_.size(), in_features_, units_, param_init_.weights, rng);
  InitBias(bias_.data(), bias_.size(), in_features_, param_init_.bias, rng);
}

std::vector<ParamRef> Dense::params() {
  return {{"weight", &weight_, &grad_weight_, true}, {"bias", &bias_, &grad_bias_, false}};
}

void Dense::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "dense");
  out.resize({n, units_});
  // Seed the output with the bias rows so that the GEMM adds into it (beta = 1).
  const float* bias = bias_.data();
  float* y = out.data();
  ParallelRange(size_t(n), std::max<size_t>(1, 65536 / size_t(units_)), [&](size_t lo, size_t hi) {
    for (size_t b = lo; b < hi; ++b) std::copy(bias, bias + units_, y + b * units_);
  });
  ParallelSgemm(false, true, n, units_, in_features_, 1.0f, in.data(), weight_.data(), 1.0f, y);
}

void Dense::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor* grad_in) {
  (void)out;
  const int n = BatchSize(in, in_, "dense");
  // dW (units x in) = grad_out^T (units x N) * in (N x in); overwritten, not added.
  ParallelSgemm(true, false, units_, in_features_, n, 1.0f, grad_out.data(), in.data(), 0.0f,
                grad_weight_.data());
  if (n == 0) grad_weight_.zero();  // an empty local batch: do not rely on BLAS for k = 0
  // db = column sums of grad_out, each summed over the batch in sample order; blocks of
  // units run in parallel.
  ParallelRange(size_t(units_), 256, [&](size_t lo, size_t hi) {
    float* db = grad_bias_.data();
    std::fill(db + lo, db + hi, 0.0f);
    for (int b = 0; b < n; ++b) {
      const float* g = grad_out.data() + size_t(b) * units_;
      for (size_t u = lo; u < hi; ++u) db[u] += g[u];
    }
  });
  if (grad_in == nullptr) return;
  // dIn (N x in) = grad_out (N x units) * W (units x in), in the input's own shape.
  grad_in->resize(in.shape());
  ParallelSgemm(false, false, n, in_features_, units_, 1.0f, grad_out.data(), weight_.data(), 0.0f,
                grad_in->data());
}

}  // namespace dlh
