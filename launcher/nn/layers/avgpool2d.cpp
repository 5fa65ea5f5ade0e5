// DLH — 2-D average pooling (NCHW, square window, stride, padding) and global average
// pooling. As PyTorch's defaults (count_include_pad): a window that reaches into the padding
// still divides by kernel * kernel, the padded cells counting as zeros. Each plane is summed
// by one thread in a fixed order, so the values do not depend on the thread count.

#include <algorithm>

#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

// Input planes per parallel block: about 32K input values.
size_t PlaneGrain(size_t plane) { return std::max<size_t>(1, 32768 / std::max<size_t>(1, plane)); }

}  // namespace

AvgPool2d::AvgPool2d(const Shape3& in, int kernel, int stride, int padding)
    : in_(in), kernel_(kernel), stride_(stride), padding_(padding) {
  out_.channels = in.channels;
  out_.height = (in.height + 2 * padding - kernel) / stride + 1;
  out_.width = (in.width + 2 * padding - kernel) / stride + 1;
}

void AvgPool2d::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "avgpool2d");
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const float inv_area = 1.0f / float(kernel_ * kernel_);
  out.resize({n, out_.channels, Ho, Wo});
  ParallelRange(size_t(n) * in_.channels, PlaneGrain(size_t(H) * W), [&](size_t lo, size_t hi) {
    for (size_t p = lo; p < hi; ++p) {
      const float* src = in.data() + p * H * W;
      float* dst = out.data() + p * Ho * Wo;
      for (int oh = 0; oh < Ho; ++oh) {
        const int h0 = oh * stride_ - padding_;
        const int h_lo = std::max(0, h0), h_hi = std::min(H, h0 + kernel_);
        for (int ow = 0; ow < Wo; ++ow) {
          const int w0 = ow * stride_ - padding_;
          const int w_lo = std::max(0, w0), w_hi = std::min(W, w0 + kernel_);
          float sum = 0.0f;
          for (int ih = h_lo; ih < h_hi; ++ih)
            for (int iw = w_lo; iw < w_hi; ++iw) sum += src[ih * W + iw];
          dst[oh * Wo + ow] = sum * inv_area;
        }
      }
    }
  });
}

void AvgPool2d::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                         Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  const int n = BatchSize(in, in_, "avgpool2d");
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const float inv_area = 1.0f / float(kernel_ * kernel_);
  grad_in->resize(in.shape());
  // Planes are independent: each thread scatters into its own planes only.
  ParallelRange(size_t(n) * in_.channels, PlaneGrain(size_t(H) * W), [&](size_t lo, size_t hi) {
    for (size_t p = lo; p < hi; ++p) {
      const float* g = grad_out.data() + p * Ho * Wo;
      float* d = grad_in->data() + p * H * W;
      std::fill(d, d + size_t(H) * W, 0.0f);
      for (int oh = 0; oh < Ho; ++oh) {
        const int h0 = oh * stride_ - padding_;
        const int h_lo = std::max(0, h0), h_hi = std::min(H, h0 + kernel_);
        for (int ow = 0; ow < Wo; ++ow) {
          const int w0 = ow * stride_ - padding_;
          const int w_lo = std::max(0, w0), w_hi = std::min(W, w0 + kernel_);
          const float share = g[oh * Wo + ow] * inv_area;
          for (int ih = h_lo; ih < h_hi; ++ih)
            for (int iw = w_lo; iw < w_hi; ++iw) d[ih * W + iw] += share;
        }
      }
    }
  });
}

void GlobalAvgPool2d::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "globalavgpool2d");
  const size_t area = size_t(in_.height) * in_.width;
  out.resize({n, in_.channels, 1, 1});
  ParallelRange(size_t(n) * in_.channels, PlaneGrain(area), [&](size_t lo, size_t hi) {
    for (size_t p = lo; p < hi; ++p) {
      const float* src = in.data() + p * area;
      double sum = 0.0;  // a 56x56 plane summed in float would lose the small values
      for (size_t i = 0; i < area; ++i) sum += src[i];
      out.data()[p] = float(sum / double(area));
    }
  });
}

void GlobalAvgPool2d::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                               Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  const int n = BatchSize(in, in_, "globalavgpool2d");
  const size_t area = size_t(in_.height) * in_.width;
  const float inv_area = 1.0f / float(area);
  grad_in->resize(in.shape());
  ParallelRange(size_t(n) * in_.channels, PlaneGrain(area), [&](size_t lo, size_t hi) {
    for (size_t p = lo; p < hi; ++p) {
      const float share = grad_out.data()[p] * inv_area;
      std::fill(grad_in->data() + p * area, grad_in->data() + (p + 1) * area, share);
    }
  });
}

}  // namespace dlh
