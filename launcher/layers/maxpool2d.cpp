// DLH — 2-D max pooling (NCHW, square window, stride, padding). Padded cells never win:
// the window is clipped to the image, which MakeLayer guarantees is never empty
// (padding < kernel). The winner of each window is remembered for backward.

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "launcher/layers/layers.hpp"

namespace dlh {

MaxPool2d::MaxPool2d(const Shape3& in, int kernel, int stride, int padding)
    : in_(in), kernel_(kernel), stride_(stride), padding_(padding) {
  out_.channels = in.channels;
  out_.height = (in.height + 2 * padding - kernel) / stride + 1;
  out_.width = (in.width + 2 * padding - kernel) / stride + 1;
}

void MaxPool2d::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "maxpool2d");
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const int planes = n * in_.channels;
  out.resize({n, out_.channels, Ho, Wo});
  argmax_.resize(out.size());
  for (int p = 0; p < planes; ++p) {
    const float* src = in.data() + size_t(p) * H * W;
    float* dst = out.data() + size_t(p) * Ho * Wo;
    int32_t* arg = argmax_.data() + size_t(p) * Ho * Wo;
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
  grad_in->zero();
  for (size_t p = 0; p < planes; ++p) {
    float* dst = grad_in->data() + p * in_plane;
    const float* g = grad_out.data() + p * out_plane;
    const int32_t* arg = argmax_.data() + p * out_plane;
    // Overlapping windows (stride < kernel) may share a winner: accumulate.
    for (size_t o = 0; o < out_plane; ++o) dst[arg[o]] += g[o];
  }
}

}  // namespace dlh
