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
#include <cstdint>
#include <cstring>

#include "common/error.hpp"
#include "launcher/nn/layers/columns.hpp"
#include "launcher/nn/layers/conv_tiles.hpp"
#include "launcher/nn/layers/gemm.hpp"
#include "launcher/nn/layers/lane_sum.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/layers/pool2x2.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

constexpr int kGradChunks = 8;  // weight-gradient partial sums per batch (fixed: see above)

// Sum of one output plane (its bias gradient for one sample) in 16 lanes (lane_sum.hpp): one
// running sum cost the first convolution of share/bench/cnn.json 40% of its backward
// (dlh-estimate profile).
float PlaneSum(const float* x, int n) {
  LaneSum<float, 16> sum;
  sum.add(size_t(n), [x](size_t i) { return x[i]; });
  return sum.total();
}

// The fused ReLU (layers/fuse.hpp), forward: y = max(y, 0) in place. And backward:
// masked = g where y > 0, else 0. Selects, not branches, on restrict pointers, so that both
// vectorise: a branch on a sign mispredicts half the time.
void ClampNegative(float* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

void MaskByPositive(const float* __restrict y, const float* __restrict g, float* __restrict masked,
                    size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i];  // loaded unconditionally: lets the loop vectorise
    masked[i] = y[i] > 0.0f ? gi : 0.0f;
  }
}

// A fused 2x2 pool's backward for one plane: writes every cell of the H x W plane `full`
// (row length W) once. Each window's winner gets 0 + its pooled gradient (as
// MaxPool2d::backward adds it to a zeroed plane), or 0 where the fused ReLU's output there,
// the pooled value `y`, is not positive; every other cell gets 0. Selects, not branches,
// and no zeroing pass first: a scatter with a data-dependent branch per window cost more
// than the GEMMs around it.
// `v` where `keep`, else +0, through the bits: the compiler turns a float select on an
// integer condition into a branch, and here the condition is a coin toss.
inline float KeepIf(float v, bool keep) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits &= 0u - uint32_t(keep);
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

template <bool kRelu>
void UnpoolPlane(const float* __restrict g, const float* __restrict y,
                 const int32_t* __restrict arg, int H, int W, float* __restrict full) {
  const int Ho = H / 2, Wo = W / 2;
  for (int oh = 0; oh < Ho; ++oh) {
    const int top = 2 * oh * W;
    float* r0 = full + top;
    float* r1 = r0 + W;
    const float* go = g + oh * Wo;
    const int32_t* ao = arg + oh * Wo;
    for (int ow = 0; ow < Wo; ++ow) {
      const float v = KeepIf(0.0f + go[ow], !kRelu || y[oh * Wo + ow] > 0.0f);
      const int c = 2 * ow, a = ao[ow] - top;  // the winner, relative to r0
      r0[c] = KeepIf(v, a == c);
      r0[c + 1] = KeepIf(v, a == c + 1);
      r1[c] = KeepIf(v, a == W + c);
      r1[c + 1] = KeepIf(v, a == W + c + 1);
    }
    if (W % 2 != 0) r0[W - 1] = r1[W - 1] = 0.0f;  // a column no window covers
  }
  if (H % 2 != 0) std::fill_n(full + size_t(H - 1) * W, W, 0.0f);  // and a row
}

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

// Row r = (c, kh, kw) of `cols` (CKK x rows*Wo) holds, for every output pixel (oh, ow) of
// one sample with row_begin <= oh < row_end, the input value under kernel tap (kh, kw), or 0
// where it is padding.
void Conv2d::im2col(const float* in, int row_begin, int row_end, float* cols) const {
  const int H = in_.height, W = in_.width, Wo = out_.width;
  const int K = kernel_, S = stride_, P = padding_;
  const size_t tile = size_t(row_end - row_begin) * Wo;
  const bool shift = SamePlaneShift(in_, out_, S);
  for (int c = 0; c < in_.channels; ++c) {
    const float* src = in + size_t(c) * H * W;
    for (int kh = 0; kh < K; ++kh) {
      for (int kw = 0; kw < K; ++kw) {
        float* dst = cols + (size_t(c * K + kh) * K + kw) * tile;
        if (shift) {
          // d[q] = src[q + dh*W + dw] for the rows where the tap is inside the image, q the
          // pixel's index in the whole plane (d is the tile's row, offset by its first
          // pixel); the |dw| border columns of each row wrap around and are zeroed
          // afterwards (the copy leaves out the one or two that would read outside the plane).
          const int dh = kh - P, dw = kw - P;
          const int oh_lo = std::max(row_begin, -dh), oh_hi = std::min(row_end, H - dh);
          const ptrdiff_t q_begin = ptrdiff_t(row_begin) * W, q_end = ptrdiff_t(row_end) * W;
          const ptrdiff_t q_lo = std::clamp(ptrdiff_t(oh_lo) * W, q_begin, q_end);
          const ptrdiff_t q_hi = std::clamp(ptrdiff_t(oh_hi) * W, q_lo, q_end);
          const ptrdiff_t off = ptrdiff_t(dh) * W + dw;
          float* d = dst - q_begin;
          std::fill(d + q_begin, d + q_lo, 0.0f);
          const ptrdiff_t copy_lo = std::max(q_lo, ptrdiff_t(-dh) * W + std::max(0, -dw));
          const ptrdiff_t copy_hi = std::min(q_hi, ptrdiff_t(H - dh) * W - std::max(0, dw));
          for (ptrdiff_t q = copy_lo; q < copy_hi; ++q) d[q] = src[q + off];
          std::fill(d + q_hi, d + q_end, 0.0f);
          for (int oh = oh_lo; oh < oh_hi; ++oh) {
            float* row = d + ptrdiff_t(oh) * W;
            for (int ow = 0; ow < -dw; ++ow) row[ow] = 0.0f;
            for (int ow = W - dw; ow < W; ++ow) row[ow] = 0.0f;
          }
          continue;
        }
        // Valid output columns for tap kw: 0 <= ow*S - P + kw < W.
        const int ow_lo = std::min(Wo, std::max(0, (P - kw + S - 1) / S));
        const int ow_hi = std::max(ow_lo, std::min(Wo, (W + P - kw + S - 1) / S));
        for (int oh = row_begin; oh < row_end; ++oh, dst += Wo) {
          const int ih = oh * S - P + kh;
          if (ih < 0 || ih >= H) {
            std::fill_n(dst, Wo, 0.0f);
            continue;
          }
          const float* s = src + size_t(ih) * W + kw - P;  // s[ow * S] is the tap
          for (int ow = 0; ow < ow_lo; ++ow) dst[ow] = 0.0f;
          if (S == 1) {
            for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = s[ow];
          } else if (S == 2) {  // a constant stride the compiler vectorises (deinterleave)
            for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = s[2 * ow];
          } else {
            for (int ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = s[ow * S];
          }
          for (int ow = ow_hi; ow < Wo; ++ow) dst[ow] = 0.0f;
        }
      }
    }
  }
}

// The adjoint of im2col for one sample's output rows [row_begin, row_end): every column
// entry is added to the input cell it came from (overlapping windows accumulate); padding
// taps are dropped. `cols` is scratch: the same-size path zeroes its wrapped border cells
// and then adds whole rows.
void Conv2d::col2im(float* cols, int row_begin, int row_end, float* grad_in) const {
  const int H = in_.height, W = in_.width, Wo = out_.width;
  const int K = kernel_, S = stride_, P = padding_;
  const size_t tile = size_t(row_end - row_begin) * Wo;
  const bool shift = SamePlaneShift(in_, out_, S);
  for (int c = 0; c < in_.channels; ++c) {
    float* dst = grad_in + size_t(c) * H * W;
    for (int kh = 0; kh < K; ++kh) {
      for (int kw = 0; kw < K; ++kw) {
        float* src = cols + (size_t(c * K + kh) * K + kw) * tile;
        if (shift) {  // the mirror image of im2col's path
          const int dh = kh - P, dw = kw - P;
          const int oh_lo = std::max(row_begin, -dh), oh_hi = std::min(row_end, H - dh);
          const ptrdiff_t q_begin = ptrdiff_t(row_begin) * W;
          const ptrdiff_t off = ptrdiff_t(dh) * W + dw;
          float* s = src - q_begin;
          for (int oh = oh_lo; oh < oh_hi; ++oh) {
            float* row = s + ptrdiff_t(oh) * W;
            for (int ow = 0; ow < -dw; ++ow) row[ow] = 0.0f;
            for (int ow = W - dw; ow < W; ++ow) row[ow] = 0.0f;
          }
          if (oh_lo >= oh_hi) continue;
          const ptrdiff_t q_lo =
              std::max(ptrdiff_t(oh_lo) * W, ptrdiff_t(-dh) * W + std::max(0, -dw));
          const ptrdiff_t q_hi =
              std::min(ptrdiff_t(oh_hi) * W, ptrdiff_t(H - dh) * W - std::max(0, dw));
          for (ptrdiff_t q = q_lo; q < q_hi; ++q) dst[q + off] += s[q];
          continue;
        }
        const int ow_lo = std::min(Wo, std::max(0, (P - kw + S - 1) / S));
        const int ow_hi = std::max(ow_lo, std::min(Wo, (W + P - kw + S - 1) / S));
        for (int oh = row_begin; oh < row_end; ++oh, src += Wo) {
          const int ih = oh * S - P + kh;
          if (ih < 0 || ih >= H) continue;
          float* d = dst + size_t(ih) * W + kw - P;
          if (S == 1) {
            for (int ow = ow_lo; ow < ow_hi; ++ow) d[ow] += src[ow];
          } else if (S == 2) {
            for (int ow = ow_lo; ow < ow_hi; ++ow) d[2 * ow] += src[ow];
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
  const size_t out_size = size_t(F) * plane;
  // With a fused pool, the layer's output is the pooled one (pool2x2.hpp's shape); the
  // full-size output lives in the thread's scratch, after the columns.
  const int pooled_h = out_.height / 2, pooled_w = out_.width / 2;
  const size_t pooled_size = size_t(F) * pooled_h * pooled_w;
  if (fused_pool_) {
    out.resize({n, F, pooled_h, pooled_w});
    argmax_.resize(size_t(n) * pooled_size);
  } else {
    out.resize({n, F, out_.height, out_.width});
  }
  const int tile_rows = ConvTileRows(ckk, out_.height, out_.width);
  const size_t cols_size = size_t(ckk) * tile_rows * out_.width;
  const size_t per_thread = cols_size + (fused_pool_ ? out_size : 0);
  scratch_.resize(size_t(CpuThreads()) * per_thread);
  ParallelFor(n, [&](int b, int thread) {
    float* cols = scratch_.data() + size_t(thread) * per_thread;
    const float* x = in.data() + size_t(b) * in_.elements();
    // Seed the output with the bias so that the GEMM adds into it (beta = 1): one pass
    // over the output fewer than zeroing it and adding the bias afterwards.
    float* y = fused_pool_ ? cols + cols_size : out.data() + size_t(b) * out_size;
    for (int f = 0; f < F; ++f) std::fill_n(y + size_t(f) * plane, plane, bias_[f]);
    for (int r0 = 0; r0 < out_.height; r0 += tile_rows) {
      const int r1 = std::min(out_.height, r0 + tile_rows), pixels = (r1 - r0) * out_.width;
      im2col(x, r0, r1, cols);
      // y[:, tile] (F x pixels, row length `plane`) += W (F x CKK) * cols (CKK x pixels).
      SgemmLd(false, false, F, pixels, ckk, 1.0f, weight_.data(), ckk, cols, pixels, 1.0f,
              y + size_t(r0) * out_.width, plane);
    }
    // While the sample's output is still in cache (layers/fuse.hpp). With a pool, the ReLU
    // clamps the pooled values only: max(z, 0) over a window is max over the window, then
    // clamped, the same float. Where every value of a window is negative the winner differs
    // from that of the clamped values, but its gradient is masked to 0 either way.
    if (fused_pool_) {
      const size_t pooled_plane = size_t(pooled_h) * pooled_w;
      for (int f = 0; f < F; ++f) {
        const size_t at = size_t(b) * pooled_size + f * pooled_plane;
        Pool2x2(y + size_t(f) * plane, out.data() + at, argmax_.data() + at, out_.width, pooled_h,
                pooled_w);
      }
      if (fused_relu_) ClampNegative(out.data() + size_t(b) * pooled_size, pooled_size);
    } else if (fused_relu_) {
      ClampNegative(y, out_size);
    }
  });
}

void Conv2d::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                      Tensor* grad_in) {
  const int n = BatchSize(in, in_, "conv2d");
  const int F = out_.channels;
  const int ckk = in_.channels * kernel_ * kernel_;
  const int plane = out_.height * out_.width;
  const size_t wsize = size_t(F) * ckk;
  if (grad_in != nullptr) grad_in->resize(in.shape());
  // `out` and `grad_out` are the layer's output and its gradient: pooled with a fused pool.
  const size_t out_size = size_t(F) * plane;
  const size_t pooled_plane = size_t(out_.height / 2) * (out_.width / 2);
  const size_t given_size = fused_pool_ ? F * pooled_plane : out_size;
  if ((fused_relu_ || fused_pool_) && out.size() != size_t(n) * given_size)
    throw Error("conv2d: backward without a matching forward");
  if (grad_out.size() != size_t(n) * given_size)
    throw Error("conv2d: the output gradient is not the output's size");
  // Per thread: one tile's columns, then (for grad_in) their gradient, then (with a fused
  // layer) the sample's full-size output gradient.
  const int tile_rows = ConvTileRows(ckk, out_.height, out_.width);
  const size_t cols_size = size_t(ckk) * tile_rows * out_.width;
  const size_t rebuilt_at = cols_size * (grad_in != nullptr ? 2 : 1);
  const size_t per_thread = rebuilt_at + (fused_relu_ || fused_pool_ ? out_size : 0);
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
      const float* g = grad_out.data() + size_t(b) * given_size;  // F x Ho*Wo unless pooled
      float* rebuilt = cols + rebuilt_at;
      if (fused_pool_) {
        // The pool's backward, then the ReLU's at the winners (the rest is 0 either way).
        const float* y = out.data() + size_t(b) * given_size;
        const int32_t* arg = argmax_.data() + size_t(b) * given_size;
        for (int f = 0; f < F; ++f) {
          const size_t at = f * pooled_plane;
          float* plane_f = rebuilt + size_t(f) * plane;
          if (fused_relu_) {
            UnpoolPlane<true>(g + at, y + at, arg + at, out_.height, out_.width, plane_f);
          } else {
            UnpoolPlane<false>(g + at, y + at, arg + at, out_.height, out_.width, plane_f);
          }
        }
        g = rebuilt;
      } else if (fused_relu_) {  // relu'(z) = (relu(z) > 0), as Relu::backward takes it
        MaskByPositive(out.data() + size_t(b) * out_size, g, rebuilt, out_size);
        g = rebuilt;
      }
      for (int f = 0; f < F; ++f)
        db[f] += PlaneSum(g + size_t(f) * plane, plane);  // double across samples
      const float* x = in.data() + size_t(b) * in_.elements();
      float* gx = grad_in != nullptr ? grad_in->data() + size_t(b) * in_.elements() : nullptr;
      if (gx != nullptr) std::fill_n(gx, in_.elements(), 0.0f);
      for (int r0 = 0; r0 < out_.height; r0 += tile_rows) {
        const int r1 = std::min(out_.height, r0 + tile_rows), pixels = (r1 - r0) * out_.width;
        const float* g_tile = g + size_t(r0) * out_.width;  // F x pixels, row length `plane`
        im2col(x, r0, r1, cols);
        // dW_chunk (F x CKK) += g_tile * cols^T (pixels x CKK); the chunk's first sample's
        // first tile overwrites.
        SgemmLd(false, true, F, ckk, pixels, 1.0f, g_tile, plane, cols, pixels,
                b == lo && r0 == 0 ? 0.0f : 1.0f, dw, ckk);
        if (gx != nullptr) {
          // dcols (CKK x pixels) = W^T (CKK x F) * g_tile, folded back into the sample.
          SgemmLd(true, false, ckk, pixels, F, 1.0f, weight_.data(), ckk, g_tile, plane, 0.0f,
                  dcols, pixels);
          col2im(dcols, r0, r1, gx);
        }
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

void Conv2d::run_column_copies(const float* sample, bool backward, bool grad_in,
                               std::vector<float>& scratch, std::vector<float>& grad_sample) const {
  const int ckk = in_.channels * kernel_ * kernel_;
  const int tile_rows = ConvTileRows(ckk, out_.height, out_.width);
  scratch.resize(size_t(ckk) * tile_rows * out_.width);
  grad_sample.resize(in_.elements());
  if (grad_in) std::fill(grad_sample.begin(), grad_sample.end(), 0.0f);  // as backward does
  for (int r0 = 0; r0 < out_.height; r0 += tile_rows) {
    const int r1 = std::min(out_.height, r0 + tile_rows);
    im2col(sample, r0, r1, scratch.data());
    if (backward) im2col(sample, r0, r1, scratch.data());
    if (grad_in) col2im(scratch.data(), r0, r1, grad_sample.data());
  }
}

void RunColumnCopies(const Layer& conv, const float* sample, bool backward, bool grad_in,
                     std::vector<float>& scratch, std::vector<float>& grad_sample) {
  const auto* c = dynamic_cast<const Conv2d*>(&conv);
  if (c == nullptr) throw Error("column copies: not a convolution");
  c->run_column_copies(sample, backward, grad_in, scratch, grad_sample);
}

}  // namespace dlh
