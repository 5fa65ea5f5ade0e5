// DLH — 2-D convolution (NCHW, square kernel, stride, zero padding) as im2col + GEMM.
//
// The whole batch is unfolded into one column matrix so that forward and each part of
// backward is a single large sgemm: OpenBLAS threads and blocks big products far better
// than N small ones, and the per-sample loop overhead disappears.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "launcher/layers/gemm.hpp"
#include "launcher/layers/layers.hpp"

namespace dlh {

Conv2d::Conv2d(const Shape3& in, int filters, int kernel, int stride, int padding)
    : in_(in), kernel_(kernel), stride_(stride), padding_(padding) {
  out_.channels = filters;
  out_.height = (in.height + 2 * padding - kernel) / stride + 1;
  out_.width = (in.width + 2 * padding - kernel) / stride + 1;
  weight_.resize({filters, in.channels, kernel, kernel});
  grad_weight_.resize(weight_.shape());
  bias_.resize({filters});
  grad_bias_.resize({filters});
  weight_.zero();
  bias_.zero();
  grad_weight_.zero();
  grad_bias_.zero();
}

void Conv2d::init(std::mt19937_64& rng) {
  // He/Kaiming normal: keeps the activation variance constant through ReLU layers.
  const double fan_in = double(in_.channels) * kernel_ * kernel_;
  std::normal_distribution<float> dist(0.0f, float(std::sqrt(2.0 / fan_in)));
  for (float& w : weight_.values()) w = dist(rng);
  bias_.zero();
}

std::vector<ParamRef> Conv2d::params() {
  return {{"weight", &weight_, &grad_weight_, true}, {"bias", &bias_, &grad_bias_, false}};
}

// Row r = (c, kh, kw) of cols_ holds, for every output pixel (n, oh, ow), the input value
// under kernel tap (kh, kw), or 0 where that tap falls into the padding.
void Conv2d::Im2Col(const float* in, int n) {
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const int K = kernel_, S = stride_, P = padding_;
  const size_t plane = size_t(Ho) * Wo;
  const size_t row_len = size_t(n) * plane;
  cols_.resize(size_t(in_.channels) * K * K * row_len);
  // Valid output columns for tap kw: 0 <= ow*S - P + kw < W.
  for (int c = 0; c < in_.channels; ++c) {
    for (int kh = 0; kh < K; ++kh) {
      for (int kw = 0; kw < K; ++kw) {
        float* row = cols_.data() + (size_t(c * K + kh) * K + kw) * row_len;
        const int ow_lo = std::min(Wo, std::max(0, (P - kw + S - 1) / S));
        const int ow_hi = std::max(ow_lo, std::min(Wo, (W + P - kw + S - 1) / S));
        for (int b = 0; b < n; ++b) {
          const float* src = in + (size_t(b) * in_.channels + c) * H * W;
          float* dst = row + size_t(b) * plane;
          for (int oh = 0; oh < Ho; ++oh, dst += Wo) {
            const int ih = oh * S - P + kh;
            if (ih < 0 || ih >= H) {
              std::memset(dst, 0, sizeof(float) * Wo);
              continue;
            }
            const float* s = src + size_t(ih) * W;
            for (int ow = 0; ow < ow_lo; ++ow) dst[ow] = 0.0f;
            for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = s[ow * S + kw - P];
            for (int ow = ow_hi; ow < Wo; ++ow) dst[ow] = 0.0f;
          }
        }
      }
    }
  }
}

// The adjoint of Im2Col: every column entry is added back to the input cell it came
// from (overlapping windows accumulate); padding taps are dropped.
void Conv2d::Col2Im(float* grad_in, int n) const {
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const int K = kernel_, S = stride_, P = padding_;
  const size_t plane = size_t(Ho) * Wo;
  const size_t row_len = size_t(n) * plane;
  std::fill_n(grad_in, size_t(n) * in_.elements(), 0.0f);
  for (int c = 0; c < in_.channels; ++c) {
    for (int kh = 0; kh < K; ++kh) {
      for (int kw = 0; kw < K; ++kw) {
        const float* row = grad_cols_.data() + (size_t(c * K + kh) * K + kw) * row_len;
        const int ow_lo = std::min(Wo, std::max(0, (P - kw + S - 1) / S));
        const int ow_hi = std::max(ow_lo, std::min(Wo, (W + P - kw + S - 1) / S));
        for (int b = 0; b < n; ++b) {
          float* dst = grad_in + (size_t(b) * in_.channels + c) * H * W;
          const float* src = row + size_t(b) * plane;
          for (int oh = 0; oh < Ho; ++oh, src += Wo) {
            const int ih = oh * S - P + kh;
            if (ih < 0 || ih >= H) continue;
            float* d = dst + size_t(ih) * W;
            for (int ow = ow_lo; ow < ow_hi; ++ow) d[ow * S + kw - P] += src[ow];
          }
        }
      }
    }
  }
}

void Conv2d::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  const int n = BatchSize(in, in_, "conv2d");
  const int F = out_.channels;
  const int ckk = in_.channels * kernel_ * kernel_;
  const size_t plane = size_t(out_.height) * out_.width;
  const int cols = int(size_t(n) * plane);
  out.resize({n, F, out_.height, out_.width});
  Im2Col(in.data(), n);
  cols_valid_ = ctx.training;
  out_cols_.resize(size_t(F) * cols);
  Sgemm(false, false, F, cols, ckk, 1.0f, weight_.data(), cols_.data(), 0.0f, out_cols_.data());
  // F x (N*Ho*Wo) -> N x F x Ho x Wo, adding the bias on the way.
  for (int b = 0; b < n; ++b) {
    for (int f = 0; f < F; ++f) {
      const float* src = out_cols_.data() + size_t(f) * cols + size_t(b) * plane;
      float* dst = out.data() + (size_t(b) * F + f) * plane;
      const float bf = bias_[f];
      for (size_t p = 0; p < plane; ++p) dst[p] = src[p] + bf;
    }
  }
}

void Conv2d::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                      Tensor* grad_in) {
  (void)out;
  const int n = BatchSize(in, in_, "conv2d");
  const int F = out_.channels;
  const int ckk = in_.channels * kernel_ * kernel_;
  const size_t plane = size_t(out_.height) * out_.width;
  const int cols = int(size_t(n) * plane);
  // The columns of the last training forward are normally still there; an evaluation
  // forward in between would have replaced them, so rebuild them in that case.
  if (!cols_valid_ || cols_.size() != size_t(ckk) * cols) Im2Col(in.data(), n);
  cols_valid_ = true;

  // grad_out N x F x Ho x Wo -> F x (N*Ho*Wo), and the bias gradient as row sums.
  out_cols_.resize(size_t(F) * cols);
  for (int f = 0; f < F; ++f) {
    double sum = 0.0;  // double: the sum runs over the whole batch of pixels
    for (int b = 0; b < n; ++b) {
      const float* src = grad_out.data() + (size_t(b) * F + f) * plane;
      float* dst = out_cols_.data() + size_t(f) * cols + size_t(b) * plane;
      float part = 0.0f;
      for (size_t p = 0; p < plane; ++p) {
        dst[p] = src[p];
        part += src[p];
      }
      sum += part;
    }
    grad_bias_[f] = float(sum);
  }
  // dW (F x CKK) = grad_out_cols (F x NP) * cols^T (NP x CKK); overwritten, not added.
  Sgemm(false, true, F, ckk, cols, 1.0f, out_cols_.data(), cols_.data(), 0.0f, grad_weight_.data());
  if (grad_in == nullptr) return;
  // dcols (CKK x NP) = W^T (CKK x F) * grad_out_cols (F x NP), then fold back.
  grad_cols_.resize(size_t(ckk) * cols);
  Sgemm(true, false, ckk, cols, F, 1.0f, weight_.data(), out_cols_.data(), 0.0f, grad_cols_.data());
  grad_in->resize(in.shape());
  Col2Im(grad_in->data(), n);
}

}  // namespace dlh
