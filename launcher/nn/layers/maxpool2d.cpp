// DLH — 2-D max pooling (NCHW, square window, stride, padding). Padded cells never win:
// the window is clipped to the image, which MakeLayer guarantees is never empty
// (padding < kernel). The winner of each window is remembered for backward.

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/layers/pool2x2.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {

MaxPool2d::MaxPool2d(const Shape3& in, int kernel, int stride, int padding)
    : in_(in), kernel_(kernel), stride_(stride), padding_(padding) {
  out_.channels = in.channels;
  out_.height = (in.height + 2 * padding - kernel) / stride + 1;
  out_.width = (in.width + 2 * padding - kernel) / stride + 1;
}

namespace {

// Input planes per parallel block: about 32K input values.
size_t PlaneGrain(size_t plane) { return std::max<size_t>(1, 32768 / std::max<size_t>(1, plane)); }

}  // namespace

void MaxPool2d::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "maxpool2d");
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const size_t planes = size_t(n) * in_.channels;
  out.resize({n, out_.channels, Ho, Wo});
  argmax_.resize(out.size());
  const bool two_by_two = kernel_ == 2 && stride_ == 2 && padding_ == 0;
  ParallelRange(planes, PlaneGrain(size_t(H) * W), [&](size_t p_lo, size_t p_hi) {
    for (size_t p = p_lo; p < p_hi; ++p) {
      const float* src = in.data() + p * H * W;
      float* dst = out.data() + p * Ho * Wo;
      int32_t* arg = argmax_.data() + p * Ho * Wo;
      if (two_by_two) {
        Pool2x2(src, dst, arg, W, Ho, Wo);
        continue;
      }
      for (int oh = 0; oh < Ho; ++oh) {
        const int h0 = oh * stride_ - padding_;
        const int h_lo = std::max(0, h0), h_hi = std::min(H, h0 + kernel_);
        for (int ow = 0; ow < Wo; ++ow) {
          const int w0 = ow * stride_ - padding_;
          const int w_lo = std::max(0, w0), w_hi = std::min(W, w0 + kernel_);
          int32_t best = h_lo * W + w_lo;
          float best_value = src[best];
          for (int ih = h_lo; ih < h_hi; ++ih) {
            for (int iw = w_lo; iw < w_hi; ++iw) {
              const float v = src[ih * W + iw];
              if (v > best_value) {  // strict: the first of equal values wins, deterministically
                best_value = v;
                best = ih * W + iw;
              }
            }
          }
          dst[oh * Wo + ow] = best_value;
          arg[oh * Wo + ow] = best;
        }
      }
    }
  });
}

void MaxPool2d::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                         Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;  // no parameters: nothing else to compute
  const int n = BatchSize(in, in_, "maxpool2d");
  const size_t in_plane = size_t(in_.height) * in_.width;
  const size_t out_plane = size_t(out_.height) * out_.width;
  const size_t planes = size_t(n) * in_.channels;
  if (argmax_.size() != planes * out_plane) {
    throw Error("maxpool2d: backward without a matching forward");
  }
  grad_in->resize(in.shape());
  // Each block owns whole planes of grad_in: no two threads write the same cell.
  ParallelRange(planes, PlaneGrain(in_plane), [&](size_t p_lo, size_t p_hi) {
    std::fill(grad_in->data() + p_lo * in_plane, grad_in->data() + p_hi * in_plane, 0.0f);
    for (size_t p = p_lo; p < p_hi; ++p) {
      float* dst = grad_in->data() + p * in_plane;
      const float* g = grad_out.data() + p * out_plane;
      const int32_t* arg = argmax_.data() + p * out_plane;
      // Overlapping windows (stride < kernel) may share a winner: accumulate.
      for (size_t o = 0; o < out_plane; ++o) dst[arg[o]] += g[o];
    }
  });
}

}  // namespace dlh
