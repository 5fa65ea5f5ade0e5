// DLH — batch normalisation, per channel over N, H, W (per feature for N x F inputs).
//
// Training forward normalises with the batch statistics (biased variance) and only
// RECORDS them in stats_; the running statistics change in commit_batch_stats(), after
// the trainer has had the chance to replace stats_ by the cross-rank average.
//
// stats_ holds {mean[C], UNBIASED variance[C]}: the running variance takes the unbiased
// batch variance (as in PyTorch), and folding n/(n-1) in here rather than at commit
// keeps commit a function of stats_ alone. Ranks with different local batch sizes (an
// uneven split) would otherwise apply different factors to the same averaged statistics
// and their running variances would drift apart.
//
// Sums are taken in double: a channel may hold N*H*W values, and the variance of fp32
// data summed in fp32 loses digits quickly. Channels run in parallel on the engine's
// threads, each channel's sums on one thread in an order fixed by the shape (WideSum), so
// every result is independent of the thread count.

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "launcher/nn/layers/lane_sum.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

// A channel's double sums in 8 lanes (lane_sum.hpp). One running double sum made batch norm
// 39% of the example spec's step at 2 threads, at 16% of its memory roofline (`dlh-estimate
// profile`). The lanes follow each plane's length, so totals do not depend on threads.
using WideSum = LaneSum<double, 8>;

}  // namespace

BatchNorm::BatchNorm(const Shape3& in, double momentum, double epsilon)
    : in_(in), momentum_(momentum), epsilon_(epsilon) {
  const int C = in.channels;
  for (Tensor* t : {&gamma_, &beta_, &grad_gamma_, &grad_beta_, &running_mean_, &running_var_}) {
    t->resize({C});
  }
  stats_.resize({2 * C});
  reset();
}

void BatchNorm::init(std::mt19937_64& rng) {
  (void)rng;  // nothing random: the identity transform and a unit running variance
  reset();
}

void BatchNorm::reset() {
  std::fill(gamma_.begin(), gamma_.end(), 1.0f);
  beta_.zero();
  grad_gamma_.zero();
  grad_beta_.zero();
  running_mean_.zero();
  std::fill(running_var_.begin(), running_var_.end(), 1.0f);
  stats_.zero();
}

std::vector<ParamRef> BatchNorm::params() {
  return {{"gamma", &gamma_, &grad_gamma_, false}, {"beta", &beta_, &grad_beta_, false}};
}

std::vector<BufferRef> BatchNorm::buffers() {
  return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
}

void BatchNorm::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  const int n = BatchSize(in, in_, "batchnorm");
  const int C = in_.channels;
  const size_t hw = size_t(in_.height) * in_.width;
  out.resize(in.shape());
  const float* x = in.data();
  float* y = out.data();

  if (!ctx.training) {
    // y = x * scale + shift with the running statistics folded in.
    ParallelFor(C, [&](int c, int) {
      const double inv = 1.0 / std::sqrt(double(running_var_[c]) + epsilon_);
      const float scale = float(gamma_[c] * inv);
      const float shift = float(beta_[c] - running_mean_[c] * gamma_[c] * inv);
      for (int b = 0; b < n; ++b) {
        const size_t off = (size_t(b) * C + c) * hw;
        for (size_t p = 0; p < hw; ++p) y[off + p] = x[off + p] * scale + shift;
      }
    });
    return;
  }

  const int64_t count = int64_t(n) * int64_t(hw);
  xhat_.resize(in.size());
  inv_std_.resize(C);
  ParallelFor(C, [&](int c, int) {
    // Two passes (mean, then squared deviations): stable for large means.
    WideSum sum;
    for (int b = 0; b < n; ++b) {
      const float* xs = x + (size_t(b) * C + c) * hw;
      sum.add(hw, [xs](size_t p) { return double(xs[p]); });
    }
    const double mean = count > 0 ? sum.total() / double(count) : 0.0;
    WideSum squares;
    for (int b = 0; b < n; ++b) {
      const float* xs = x + (size_t(b) * C + c) * hw;
      squares.add(hw, [xs, mean](size_t p) {
        const double d = xs[p] - mean;
        return d * d;
      });
    }
    const double sq = squares.total();
    const double var = count > 0 ? sq / double(count) : 0.0;  // biased, for normalisation
    stats_[c] = float(mean);
    // Unbiased, for the running variance; undefined for a single value, where the
    // (zero) biased variance stands in rather than a division by zero.
    stats_[C + c] = float(count > 1 ? sq / double(count - 1) : var);
    const float inv = float(1.0 / std::sqrt(var + epsilon_));
    inv_std_[c] = inv;
    const float m = float(mean), g = gamma_[c], be = beta_[c];
    for (int b = 0; b < n; ++b) {
      const size_t off = (size_t(b) * C + c) * hw;
      for (size_t p = 0; p < hw; ++p) {
        const float xh = (x[off + p] - m) * inv;
        xhat_[off + p] = xh;
        y[off + p] = g * xh + be;
      }
    }
  });
}

void BatchNorm::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                         Tensor* grad_in) {
  (void)out;
  const int n = BatchSize(in, in_, "batchnorm");
  const int C = in_.channels;
  const size_t hw = size_t(in_.height) * in_.width;
  const double count = double(n) * double(hw);
  if (xhat_.size() != in.size()) {
    throw Error("batchnorm: backward without a matching training forward");
  }
  const float* g = grad_out.data();
  if (grad_in != nullptr) grad_in->resize(in.shape());
  ParallelFor(C, [&](int c, int) {
    WideSum beta_sum, gamma_sum;
    for (int b = 0; b < n; ++b) {
      const float* gs = g + (size_t(b) * C + c) * hw;
      const float* xh = xhat_.data() + (size_t(b) * C + c) * hw;
      beta_sum.add(hw, [gs](size_t p) { return double(gs[p]); });
      gamma_sum.add(hw, [gs, xh](size_t p) { return double(gs[p]) * xh[p]; });
    }
    const double dbeta = beta_sum.total(), dgamma = gamma_sum.total();
    grad_beta_[c] = float(dbeta);
    grad_gamma_[c] = float(dgamma);
    if (grad_in == nullptr || count == 0) return;
    // The batch statistics depend on every input, hence the two mean terms:
    // dx = gamma * inv_std / n * (n * g - sum(g) - xhat * sum(g * xhat)).
    const float k = float(gamma_[c] * inv_std_[c] / count);
    const float a = float(count), mb = float(dbeta), mg = float(dgamma);
    float* d = grad_in->data();
    for (int b = 0; b < n; ++b) {
      const size_t off = (size_t(b) * C + c) * hw;
      for (size_t p = 0; p < hw; ++p) d[off + p] = k * (a * g[off + p] - mb - xhat_[off + p] * mg);
    }
  });
}

void BatchNorm::commit_batch_stats() {
  const int C = in_.channels;
  const double m = momentum_;
  for (int c = 0; c < C; ++c) {
    running_mean_[c] = float((1.0 - m) * running_mean_[c] + m * stats_[c]);
    running_var_[c] = float((1.0 - m) * running_var_[c] + m * stats_[C + c]);
  }
}

}  // namespace dlh
