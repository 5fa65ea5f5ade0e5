// DLH — 2-D convolution (NCHW, square kernel, stride, zero padding) as im2col + GEMM,
// one sample at a time.
//
// Per sample, W (F x CKK) times the sample's columns (CKK x Ho*Wo) IS the sample's NCHW
// output, and its output gradient is already the F x Ho*Wo matrix that backward needs:
// no layout transposes. The columns (a few hundred KB) stay in the core's cache from
// im2col to GEMM, and backward rebuilds them instead of keeping a whole-batch copy (tens
// of MB of memory traffic). Samples run in parallel on the engine's threads, each GEMM on
// one thread; the weight gradient is summed per fixed chunk of samples and the chunks are
// added in order, so every result is independent of the thread count.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "launcher/nn/layers/gemm.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

constexpr int kGradChunks = 8;  // weight-gradient partial sums per batch (fixed: see above)

}  // namespace

Conv2d::Conv2d(const Shape3& in, int filters, int kernel, int stride, int padding, ParamInit init)
    : in_(in), kernel_(kernel), stride_(stride), padding_(padding), param_init_(init) {
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
  // Fans as PyTorch counts them for a convolution: every kernel tap is an input (or output).
  const double taps = double(kernel_) * kernel_;
  const double fan_in = in_.channels * taps, fan_out = out_.channels * taps;
  InitWeights(weight_.data(), weight_.size(), fan_in, fan_out, param_init_.weights, rng);
  InitBias(bias_.data(), bias_.size(), fan_in, param_init_.bias, rng);
}

std::vector<ParamRef> Conv2d::params() {
  return {{"weight", &weight_, &grad_weight_, true}, {"bias", &bias_, &grad_bias_, false}};
}

namespace {

// A stride-1 convolution whose output has the input's size ("same" padding, 2P = K-1):
// then tap (kh, kw) reads the input plane shifted by one fixed offset, so im2col and
// col2im become long contiguous copies and adds, plus a few border cells.
bool SamePlaneShift(const Shape3& in, const Shape3& out, int stride) {
  return stride == 1 && out.height == in.height && out.width == in.width;
}

}  // namespace

// Row r = (c, kh, kw) of `cols` (CKK x Ho*Wo) holds, for every output pixel (oh, ow) of
// one sample, the input value under kernel tap (kh, kw), or 0 where it is padding.
void Conv2d::im2col(const float* in, float* cols) const {
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const int K = kernel_, S = stride_, P = padding_;
  const size_t plane = size_t(Ho) * Wo;
  const bool shift = SamePlaneShift(in_, out_, S);
  for (int c = 0; c < in_.channels; ++c) {
    const float* src = in + size_t(c) * H * W;
    for (int kh = 0; kh < K; ++kh) {
      for (int kw = 0; kw < K; ++kw) {
        float* dst = cols + (size_t(c * K + kh) * K + kw) * plane;
        if (shift) {
          // dst[q] = src[q + dh*W + dw] for the rows where the tap is inside the image;
          // the |dw| border columns of each row wrap around and are zeroed afterwards (the
          // copy leaves out the one or two that would read outside the plane).
          const int dh = kh - P, dw = kw - P;
          const int oh_lo = std::max(0, -dh), oh_hi = std::min(H, H - dh);
          const ptrdiff_t q_lo = ptrdiff_t(oh_lo) * W, q_hi = ptrdiff_t(oh_hi) * W;
          const ptrdiff_t off = ptrdiff_t(dh) * W + dw;
          std::fill(dst, dst + q_lo, 0.0f);
          for (ptrdiff_t q = q_lo + std::max(0, -dw); q < q_hi - std::max(0, dw); ++q)
            dst[q] = src[q + off];
          std::fill(dst + q_hi, dst + plane, 0.0f);
          for (int oh = oh_lo; oh < oh_hi; ++oh) {
            float* row = dst + size_t(oh) * W;
            for (int ow = 0; ow < -dw; ++ow) row[ow] = 0.0f;
            for (int ow = W - dw; ow < W; ++ow) row[ow] = 0.0f;
          }
          continue;
        }
        // Valid output columns for tap kw: 0 <= ow*S - P + kw < W.
        const int ow_lo = std::min(Wo, std::max(0, (P - kw + S - 1) / S));
        const int ow_hi = std::max(ow_lo, std::min(Wo, (W + P - kw + S - 1) / S));
        for (int oh = 0; oh < Ho; ++oh, dst += Wo) {
          const int ih = oh * S - P + kh;
          if (ih < 0 || ih >= H) {
            std::fill_n(dst, Wo, 0.0f);
            continue;
          }
          const float* s = src + size_t(ih) * W + kw - P;  // s[ow * S] is the tap
          for (int ow = 0; ow < ow_lo; ++ow) dst[ow] = 0.0f;
          if (S == 1) {
            for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = s[ow];
          } else {
            for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = s[ow * S];
          }
          for (int ow = ow_hi; ow < Wo; ++ow) dst[ow] = 0.0f;
        }
      }
    }
  }
}

// The adjoint of im2col for one sample: every column entry is added back to the input
// cell it came from (overlapping windows accumulate); padding taps are dropped. `cols` is
// scratch: the same-size path zeroes its wrapped border cells and then adds whole rows.
void Conv2d::col2im(float* cols, float* grad_in) const {
  const int H = in_.height, W = in_.width, Ho = out_.height, Wo = out_.width;
  const int K = kernel_, S = stride_, P = padding_;
  const size_t plane = size_t(Ho) * Wo;
  const bool shift = SamePlaneShift(in_, out_, S);
  std::fill_n(grad_in, in_.elements(), 0.0f);
  for (int c = 0; c < in_.channels; ++c) {
    float* dst = grad_in + size_t(c) * H * W;
    for (int kh = 0; kh < K; ++kh) {
      for (int kw = 0; kw < K; ++kw) {
        float* src = cols + (size_t(c * K + kh) * K + kw) * plane;
        if (shift) {  // the mirror image of im2col's path
          const int dh = kh - P, dw = kw - P;
          const int oh_lo = std::max(0, -dh), oh_hi = std::min(H, H - dh);
          const ptrdiff_t off = ptrdiff_t(dh) * W + dw;
          for (int oh = oh_lo; oh < oh_hi; ++oh) {
            float* row = src + size_t(oh) * W;
            for (int ow = 0; ow < -dw; ++ow) row[ow] = 0.0f;
            for (int ow = W - dw; ow < W; ++ow) row[ow] = 0.0f;
          }
          const ptrdiff_t q_lo = ptrdiff_t(oh_lo) * W + std::max(0, -dw);
          const ptrdiff_t q_hi = ptrdiff_t(oh_hi) * W - std::max(0, dw);
          for (ptrdiff_t q = q_lo; q < q_hi; ++q) dst[q + off] += src[q];
          continue;
        }
        const int ow_lo = std::min(Wo, std::max(0, (P - kw + S - 1) / S));
        const int ow_hi = std::max(ow_lo, std::min(Wo, (W + P - kw + S - 1) / S));
        for (int oh = 0; oh < Ho; ++oh, src += Wo) {
          const int ih = oh * S - P + kh;
          if (ih < 0 || ih >= H) continue;
          float* d = dst + size_t(ih) * W + kw - P;
          if (S == 1) {
            for (int ow = ow_lo; ow < ow_hi; ++ow) d[ow] += src[ow];
          } else {
            for (int ow = ow_lo; ow < ow_hi; ++ow) d[ow * S] += src[ow];
          }
        }
      }
    }
  }
}

void Conv2d::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "conv2d");
  const int F = out_.channels;
  const int ckk = in_.channels * kernel_ * kernel_;
  const int plane = out_.height * out_.width;
  out.resize({n, F, out_.height, out_.width});
  const size_t per_thread = size_t(ckk) * plane;
  scratch_.resize(size_t(CpuThreads()) * per_thread);
  ParallelFor(n, [&](int b, int thread) {
    float* cols = scratch_.data() + size_t(thread) * per_thread;
    im2col(in.data() + size_t(b) * in_.elements(), cols);
    // Seed the output with the bias so that the GEMM adds into it (beta = 1): one pass
    // over the output fewer than zeroing it and adding the bias afterwards.
    float* y = out.data() + size_t(b) * F * plane;
    for (int f = 0; f < F; ++f) std::fill_n(y + size_t(f) * plane, plane, bias_[f]);
    Sgemm(false, false, F, plane, ckk, 1.0f, weight_.data(), cols, 1.0f, y);
  });
}

void Conv2d::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                      Tensor* grad_in) {
  (void)out;
  const int n = BatchSize(in, in_, "conv2d");
  const int F = out_.channels;
  const int ckk = in_.channels * kernel_ * kernel_;
  const int plane = out_.height * out_.width;
  const size_t wsize = size_t(F) * ckk;
  if (grad_in != nullptr) grad_in->resize(in.shape());
  // Per thread: the sample's columns, then (for grad_in) their gradient.
  const size_t cols_size = size_t(ckk) * plane;
  const size_t per_thread = cols_size * (grad_in != nullptr ? 2 : 1);
  scratch_.resize(size_t(CpuThreads()) * per_thread);
  const int chunks = std::min(n, kGradChunks);
  partial_w_.resize(size_t(chunks) * wsize);
  partial_b_.resize(size_t(chunks) * F);

  ParallelFor(chunks, [&](int chunk, int thread) {
    float* cols = scratch_.data() + size_t(thread) * per_thread;
    float* dcols = cols + cols_size;
    float* dw = partial_w_.data() + size_t(chunk) * wsize;
    double* db = partial_b_.data() + size_t(chunk) * F;
    std::fill_n(db, F, 0.0);
    const int lo = int(int64_t(n) * chunk / chunks), hi = int(int64_t(n) * (chunk + 1) / chunks);
    for (int b = lo; b < hi; ++b) {
      const float* g = grad_out.data() + size_t(b) * F * plane;  // F x Ho*Wo
      im2col(in.data() + size_t(b) * in_.elements(), cols);
      // dW_chunk (F x CKK) += g (F x P) * cols^T (P x CKK); the chunk's first sample
      // overwrites.
      Sgemm(false, true, F, ckk, plane, 1.0f, g, cols, b == lo ? 0.0f : 1.0f, dw);
      for (int f = 0; f < F; ++f) {
        const float* gf = g + size_t(f) * plane;
        float part = 0.0f;
        for (int p = 0; p < plane; ++p) part += gf[p];
        db[f] += part;  // double across samples: the sum runs over the whole batch
      }
      if (grad_in != nullptr) {
        // dcols (CKK x P) = W^T (CKK x F) * g (F x P), folded back into the sample.
        Sgemm(true, false, ckk, plane, F, 1.0f, weight_.data(), g, 0.0f, dcols);
        col2im(dcols, grad_in->data() + size_t(b) * in_.elements());
      }
    }
  });

  // Sum the chunks in chunk order (parallel over weights: each weight's sum is serial).
  if (chunks == 0) {
    grad_weight_.zero();
    grad_bias_.zero();
    return;
  }
  ParallelRange(wsize, 4096, [&](size_t lo, size_t hi) {
    float* dw = grad_weight_.data();
    std::copy(partial_w_.begin() + lo, partial_w_.begin() + hi, dw + lo);
    for (int c = 1; c < chunks; ++c) {
      const float* p = partial_w_.data() + size_t(c) * wsize;
      for (size_t i = lo; i < hi; ++i) dw[i] += p[i];
    }
  });
  for (int f = 0; f < F; ++f) {
    double sum = 0.0;
    for (int c = 0; c < chunks; ++c) sum += partial_b_[size_t(c) * F + f];
    grad_bias_[f] = float(sum);
  }
}

}  // namespace dlh
