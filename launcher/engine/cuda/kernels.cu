// DLH — CUDA kernels of the GPU engine (see kernels.hpp).
#include <cmath>
#include <cstdint>

#include "launcher/engine/cuda/check.hpp"
#include "launcher/engine/cuda/kernels.hpp"
#include "launcher/nn/random.hpp"

namespace dlh {
namespace cuda {
namespace {

constexpr int kThreads = 256;  // every kernel; the reductions rely on it being fixed

unsigned Blocks(size_t count) {
  size_t b = (count + kThreads - 1) / kThreads;
  return unsigned(b < 65535 * 8 ? (b == 0 ? 1 : b) : 65535 * 8);
}

// Sum over the block in a fixed tree order; the result is valid in thread 0.
template <typename T>
__device__ T BlockSum(T v, T* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (int(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  T r = shared[0];
  __syncthreads();
  return r;
}

__global__ void AddBiasKernel(float* y, const float* bias, size_t count, int features) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] += bias[i % features];
}

__global__ void DropoutKernel(const float* x, float* y, float* mask, size_t count, uint64_t key,
                              uint64_t threshold, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const float m = DropoutKeeps(key, i, threshold) ? scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

__global__ void MultiplyKernel(const float* a, const float* b, float* out, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    out[i] = a[i] * b[i];
}

__global__ void FillKernel(float* p, float value, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

// The batchnorm reductions: a grid of channels (x) by parts (y). Part j of channel ch is
// a fixed range of the channel's n * hw values; its block sums them into
// partials[ch * parts + j], and the parts are added in index order afterwards. The part
// count depends on the shape alone (BatchNormParts), so every run adds in the same order.
constexpr int kMaxParts = 32;           // per channel: enough blocks to fill the GPU
constexpr int kPerPart = 4 * kThreads;  // fewest values a part is worth a block for

int BatchNormParts(int64_t count) {
  const int64_t parts = (count + kPerPart - 1) / kPerPart;
  return int(parts < 1 ? 1 : parts > kMaxParts ? kMaxParts : parts);
}

// Where one channel's values lie: element e of the channel's n * hw is x[(b * c + ch) * hw
// + p] with b = e / hw, p = e % hw. A thread starts at e = begin + threadIdx.x (one division)
// and steps kThreads = step_b * hw + step_p at a time with additions only.
struct ChannelLayout {
  int c, hw;
  int step_b, step_p;  // kThreads / hw, kThreads % hw (computed on the host)
  int64_t count;       // n * hw
  int parts;
};

ChannelLayout Layout(int n, int c, int hw) {
  ChannelLayout l;
  l.c = c, l.hw = hw;
  l.step_b = hw > 0 ? kThreads / hw : 0;
  l.step_p = hw > 0 ? kThreads % hw : 0;
  l.count = int64_t(n) * hw;
  l.parts = BatchNormParts(l.count);
  return l;
}

// Calls f(i) for this thread's indices i of part blockIdx.y of channel blockIdx.x, in
// increasing order.
template <typename F>
__device__ void ForPart(const ChannelLayout& l, F f) {
  const int ch = blockIdx.x;
  const int64_t chunk = (l.count + l.parts - 1) / l.parts;
  const int64_t begin = chunk * blockIdx.y;
  const int64_t end = begin + chunk < l.count ? begin + chunk : l.count;
  int64_t e = begin + threadIdx.x;
  if (e >= end) return;
  int b = int(e / l.hw), p = int(e % l.hw);
  const size_t plane = size_t(l.c) * l.hw;
  const size_t jump = size_t(l.step_b) * plane + size_t(l.step_p);
  const size_t wrap = plane - size_t(l.hw);  // end of sample b's row to sample b + 1's
  size_t i = (size_t(b) * l.c + ch) * l.hw + p;
  for (; e < end; e += kThreads) {
    f(i);
    i += jump;
    p += l.step_p;
    if (p >= l.hw) {
      p -= l.hw;
      i += wrap;
    }
  }
}

// The channel's total: its parts' partial sums in index order. Every kernel that needs it
// computes it with this same code, so all see the same bits.
__device__ double ChannelTotal(const double* partials, int ch, int parts) {
  double total = 0;
  for (int j = 0; j < parts; ++j) total += partials[size_t(ch) * parts + j];
  return total;
}

__global__ void BatchNormSumKernel(const float* x, double* partials, ChannelLayout l) {
  __shared__ double shared[kThreads];
  double sum = 0;
  ForPart(l, [&](size_t i) { sum += x[i]; });
  sum = BlockSum(sum, shared);
  if (threadIdx.x == 0) partials[size_t(blockIdx.x) * l.parts + blockIdx.y] = sum;
}

// Squared deviations from the mean (two passes, as on the CPU).
__global__ void BatchNormSquaresKernel(const float* x, const double* sums, double* partials,
                                       ChannelLayout l) {
  __shared__ double shared[kThreads];
  const double mean = ChannelTotal(sums, blockIdx.x, l.parts) / double(l.count);
  double sq = 0;
  ForPart(l, [&](size_t i) {
    const double d = x[i] - mean;
    sq += d * d;
  });
  sq = BlockSum(sq, shared);
  if (threadIdx.x == 0) partials[size_t(blockIdx.x) * l.parts + blockIdx.y] = sq;
}

// One thread per channel.
__global__ void BatchNormStatsKernel(const double* sums, const double* squares, float* stats,
                                     float* inv_std, ChannelLayout l, double epsilon) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= l.c) return;
  const int64_t count = l.count;
  const double mean = count > 0 ? ChannelTotal(sums, ch, l.parts) / double(count) : 0.0;
  const double sq = ChannelTotal(squares, ch, l.parts);
  const double var = count > 0 ? sq / double(count) : 0.0;
  stats[ch] = float(mean);
  stats[l.c + ch] = float(count > 1 ? sq / double(count - 1) : var);
  inv_std[ch] = float(1.0 / sqrt(var + epsilon));
}

template <typename Index>
__global__ void BatchNormNormalizeKernel(const float* x, float* y, float* xhat, const float* stats,
                                         const float* inv_std, const float* gamma,
                                         const float* beta, Index count, int c, int hw) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += Index(gridDim.x) * blockDim.x) {
    const int ch = int((i / Index(hw)) % Index(c));
    const float xh = (x[i] - stats[ch]) * inv_std[ch];
    xhat[i] = xh;
    y[i] = gamma[ch] * xh + beta[ch];
  }
}

template <typename Index>
__global__ void BatchNormInferKernel(const float* x, float* y, const float* gamma,
                                     const float* beta, const float* mean, const float* var,
                                     Index count, int c, int hw, double epsilon) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += Index(gridDim.x) * blockDim.x) {
    const int ch = int((i / Index(hw)) % Index(c));
    const double inv = 1.0 / sqrt(double(var[ch]) + epsilon);
    const float scale = float(gamma[ch] * inv);
    const float shift = float(beta[ch] - mean[ch] * gamma[ch] * inv);
    y[i] = x[i] * scale + shift;
  }
}

// Partial sums of dy and dy * xhat over the grid of BatchNormSumKernel.
__global__ void BatchNormGradPartsKernel(const float* dy, const float* xhat, double* db_parts,
                                         double* dg_parts, ChannelLayout l) {
  __shared__ double shared[kThreads];
  double db = 0, dg = 0;
  ForPart(l, [&](size_t i) {
    db += dy[i];
    dg += double(dy[i]) * xhat[i];
  });
  db = BlockSum(db, shared);
  dg = BlockSum(dg, shared);
  if (threadIdx.x == 0) {
    db_parts[size_t(blockIdx.x) * l.parts + blockIdx.y] = db;
    dg_parts[size_t(blockIdx.x) * l.parts + blockIdx.y] = dg;
  }
}

// One thread per channel: dbeta = sum(dy), dgamma = sum(dy * xhat).
__global__ void BatchNormGradParamsKernel(const double* db_parts, const double* dg_parts,
                                          float* dgamma, float* dbeta, ChannelLayout l) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= l.c) return;
  dbeta[ch] = float(ChannelTotal(db_parts, ch, l.parts));
  dgamma[ch] = float(ChannelTotal(dg_parts, ch, l.parts));
}

// dx = gamma * inv_std / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)), m = n * hw.
template <typename Index>
__global__ void BatchNormGradInputKernel(const float* dy, const float* xhat, const float* gamma,
                                         const float* inv_std, const float* dgamma,
                                         const float* dbeta, float* dx, Index count, int c, int hw,
                                         double m) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += Index(gridDim.x) * blockDim.x) {
    const int ch = int((i / Index(hw)) % Index(c));
    const float k = float(gamma[ch] * inv_std[ch] / m);
    dx[i] = k * (float(m) * dy[i] - dbeta[ch] - xhat[i] * dgamma[ch]);
  }
}

// The element-wise batchnorm kernels find an element's channel by division: in 32 bits
// (several times cheaper than 64) when every index, and a grid stride past the last, fits.
// The grid stride is below 2^27 (Blocks), so counts up to 2^31 qualify.
template <typename Launch>
void WithIndexType(size_t count, Launch launch) {
  if (count <= size_t(INT32_MAX))
    launch(uint32_t(0));
  else
    launch(size_t(0));
}

__global__ void BatchNormCommitKernel(float* mean, float* var, const float* stats, int c,
                                      double momentum) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean[ch] = float((1.0 - momentum) * mean[ch] + momentum * stats[ch]);
  var[ch] = float((1.0 - momentum) * var[ch] + momentum * stats[c + ch]);
}

// One block: thread t takes samples t, t + 256, ...; sums combine in a fixed tree. The
// arithmetic is launcher/nn/layers/loss.cpp's, smoothing included.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int n,
                                          int classes, float scale, float* grad, double* sums,
                                          int* bad_label, double label_smoothing) {
  __shared__ double shared[kThreads];
  double loss = 0, hits = 0;
  for (int b = threadIdx.x; b < n; b += kThreads) {
    const int label = labels[b];
    if (label < 0 || label >= classes) {
      atomicCAS(bad_label, 0, b + 1);
      continue;
    }
    const float* z = logits + size_t(b) * classes;
    int best = 0;
    for (int k = 1; k < classes; ++k)
      if (z[k] > z[best]) best = k;
    const double zmax = z[best];
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += exp(double(z[k]) - zmax);
    const double nll = log(sum) - (double(z[label]) - zmax);  // -log softmax[label]
    loss += nll;
    hits += best == label ? 1.0 : 0.0;
    // Smoothed: loss = (1 - s) * nll + s * mean_k -log p_k.
    const double smooth = label_smoothing / double(classes);
    if (label_smoothing > 0) {
      double mean_log_p = 0;
      for (int k = 0; k < classes; ++k) mean_log_p += double(z[k]) - zmax;
      mean_log_p = mean_log_p / double(classes) - log(sum);
      loss = loss - label_smoothing * nll - label_smoothing * mean_log_p;
    }
    if (grad != nullptr) {
      float* g = grad + size_t(b) * classes;
      const double inv = 1.0 / sum;
      const double on_label = 1.0 - label_smoothing + smooth;
      for (int k = 0; k < classes; ++k) {
        const double p = exp(double(z[k]) - zmax) * inv;
        // q_k: exactly one-hot unsmoothed, as on the CPU.
        const double q =
            label_smoothing > 0 ? (k == label ? on_label : smooth) : (k == label ? 1.0 : 0.0);
        g[k] = float((p - q) * scale);
      }
    }
  }
  loss = BlockSum(loss, shared);
  hits = BlockSum(hits, shared);
  if (threadIdx.x == 0) {
    sums[0] = loss;
    sums[1] = hits;
  }
}

// Average pooling, one thread per output value: the window's cells inside the plane, row by
// row, in float, then times 1 / (kernel * kernel), as the CPU computes it (the padding's
// zeros add nothing).
template <typename Index>
__global__ void AvgPoolForwardKernel(const float* x, float* y, PoolGeometry g, Index count,
                                     float inv_area) {
  const Index out_plane = Index(g.out_height) * Index(g.out_width);
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += Index(gridDim.x) * blockDim.x) {
    const Index p = i / out_plane;
    const int r = int(i - p * out_plane);
    const int oh = r / g.out_width, ow = r % g.out_width;
    const int h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
    const int h_lo = max(0, h0), h_hi = min(g.height, h0 + g.kernel);
    const int w_lo = max(0, w0), w_hi = min(g.width, w0 + g.kernel);
    const float* src = x + size_t(p) * size_t(g.height) * size_t(g.width);
    float sum = 0.0f;
    for (int ih = h_lo; ih < h_hi; ++ih)
      for (int iw = w_lo; iw < w_hi; ++iw) sum += src[ih * g.width + iw];
    y[i] = sum * inv_area;
  }
}

// The input gradient, one thread per input value (a gather, so no two threads write the
// same value and no atomics run): the shares dy * (1 / (kernel * kernel)) of the windows
// that hold the value, added in the order (oh, ow) in which the CPU scatters them, each
// share rounded before the addition (no fused multiply-add), as the CPU's x86-64 code does.
template <typename Index>
__global__ void AvgPoolBackwardKernel(const float* dy, float* dx, PoolGeometry g, Index count,
                                      float inv_area) {
  const Index in_plane = Index(g.height) * Index(g.width);
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += Index(gridDim.x) * blockDim.x) {
    const Index p = i / in_plane;
    const int r = int(i - p * in_plane);
    const int hp = r / g.width + g.padding, wp = r % g.width + g.padding;  // padded coordinates
    // Window oh holds row hp when oh * stride <= hp < oh * stride + kernel.
    const int oh_lo = hp < g.kernel ? 0 : (hp - g.kernel) / g.stride + 1;
    const int oh_hi = min(g.out_height - 1, hp / g.stride);
    const int ow_lo = wp < g.kernel ? 0 : (wp - g.kernel) / g.stride + 1;
    const int ow_hi = min(g.out_width - 1, wp / g.stride);
    const float* src = dy + size_t(p) * size_t(g.out_height) * size_t(g.out_width);
    float sum = 0.0f;
    for (int oh = oh_lo; oh <= oh_hi; ++oh)
      for (int ow = ow_lo; ow <= ow_hi; ++ow)
        sum = __fadd_rn(sum, __fmul_rn(src[oh * g.out_width + ow], inv_area));
    dx[i] = sum;
  }
}

// One warp per plane: lane l sums values l, l + 32, ... in double, then a fixed shuffle
// tree adds the lanes. Which warp takes a plane does not change its order.
constexpr int kWarp = 32;
__global__ void GlobalAvgPoolForwardKernel(const float* x, float* y, size_t planes, size_t area) {
  const unsigned lane = threadIdx.x % kWarp;
  const size_t warps = size_t(gridDim.x) * (blockDim.x / kWarp);
  // p is the same for every lane of a warp (blockDim.x is a multiple of 32), so the whole
  // warp takes part in each shuffle.
  for (size_t p = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; p < planes; p += warps) {
    const float* src = x + p * area;
    double sum = 0;
    for (size_t j = lane; j < area; j += kWarp) sum += src[j];
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[p] = float(sum / double(area));
  }
}

template <typename Index>
__global__ void GlobalAvgPoolBackwardKernel(const float* dy, float* dx, Index count, Index area,
                                            float inv_area) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += Index(gridDim.x) * blockDim.x)
    dx[i] = dy[i / area] * inv_area;
}

// GELU and SiLU as launcher/nn/layers/smooth_activation.cpp writes them (erff and expf
// agree with the host's to a few ulp).
constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

__device__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

struct GeluFn {
  __device__ float operator()(float x) const { return x * 0.5f * (1.0f + erff(x * kInvSqrt2)); }
};
struct GeluGradFn {
  __device__ float operator()(float x) const {
    return 0.5f * (1.0f + erff(x * kInvSqrt2)) + x * expf(-0.5f * x * x) * kInvSqrt2Pi;
  }
};
struct SiluFn {
  __device__ float operator()(float x) const { return x * Sigmoid(x); }
};
struct SiluGradFn {
  __device__ float operator()(float x) const {
    const float s = Sigmoid(x);
    return s * (1.0f + x * (1.0f - s));
  }
};

// y[i] = f(x[i]).
template <typename F>
__global__ void MapKernel(const float* x, float* y, size_t count, F f) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    y[i] = f(x[i]);
}

// dx[i] = dy[i] * df(x[i]).
template <typename F>
__global__ void MapGradKernel(const float* x, const float* dy, float* dx, size_t count, F df) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    dx[i] = dy[i] * df(x[i]);
}

// The decay of element i (see kernels.hpp: kParamAlign is a power of two, so the division
// is a shift).
__device__ float DecayOf(const uint8_t* decays, size_t i, float decay) {
  return decays == nullptr || decays[i / kParamAlign] != 0 ? decay : 0.0f;
}

__global__ void SgdKernel(float* w, const float* g, float* buf, const uint8_t* decays, size_t n,
                          float lr, float mu, float decay, bool nesterov) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float d = g[i] + DecayOf(decays, i, decay) * w[i];
    if (buf == nullptr) {
      w[i] -= lr * d;
    } else if (nesterov) {
      buf[i] = mu * buf[i] + d;
      w[i] -= lr * (d + mu * buf[i]);
    } else {
      buf[i] = mu * buf[i] + d;
      w[i] -= lr * buf[i];
    }
  }
}

__global__ void AdamKernel(float* w, const float* g, float* m, float* v, const uint8_t* decays,
                           size_t n, float lr, float b1, float b2, float c1, float c2, float eps,
                           float decay) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    w[i] -= DecayOf(decays, i, decay) * w[i] + lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
  }
}

void Launched() { CUDA_CHECK(cudaGetLastError()); }

}  // namespace

void AddBias(float* y, const float* bias, int n, int features, cudaStream_t stream) {
  const size_t count = size_t(n) * features;
  if (count == 0) return;
  AddBiasKernel<<<Blocks(count), kThreads, 0, stream>>>(y, bias, count, features);
  Launched();
}

void DropoutForward(const float* x, float* y, float* mask, size_t count, uint64_t key,
                    uint64_t threshold, float scale, cudaStream_t stream) {
  if (count == 0) return;
  DropoutKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, mask, count, key, threshold, scale);
  Launched();
}

void Multiply(const float* a, const float* b, float* out, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  MultiplyKernel<<<Blocks(count), kThreads, 0, stream>>>(a, b, out, count);
  Launched();
}

void Fill(float* p, float value, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  FillKernel<<<Blocks(count), kThreads, 0, stream>>>(p, value, count);
  Launched();
}

size_t BatchNormScratchSize(int c) { return 2 * size_t(kMaxParts) * size_t(c > 0 ? c : 0); }

void BatchNormTrainForward(const float* x, float* y, float* xhat, float* stats, float* inv_std,
                           const float* gamma, const float* beta, double* scratch, int n, int c,
                           int hw, double epsilon, cudaStream_t stream) {
  if (c <= 0) return;
  const ChannelLayout l = Layout(n, c, hw);
  double* sums = scratch;
  double* squares = scratch + size_t(c) * l.parts;
  const dim3 grid(unsigned(c), unsigned(l.parts));
  BatchNormSumKernel<<<grid, kThreads, 0, stream>>>(x, sums, l);
  Launched();
  BatchNormSquaresKernel<<<grid, kThreads, 0, stream>>>(x, sums, squares, l);
  Launched();
  BatchNormStatsKernel<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(sums, squares, stats,
                                                                               inv_std, l, epsilon);
  Launched();
  const size_t count = size_t(n) * c * hw;
  if (count == 0) return;
  WithIndexType(count, [&](auto zero) {
    using Index = decltype(zero);
    BatchNormNormalizeKernel<<<Blocks(count), kThreads, 0, stream>>>(
        x, y, xhat, stats, inv_std, gamma, beta, Index(count), c, hw);
  });
  Launched();
}

void BatchNormInferForward(const float* x, float* y, const float* gamma, const float* beta,
                           const float* running_mean, const float* running_var, int n, int c,
                           int hw, double epsilon, cudaStream_t stream) {
  const size_t count = size_t(n) * c * hw;
  if (count == 0) return;
  WithIndexType(count, [&](auto zero) {
    using Index = decltype(zero);
    BatchNormInferKernel<<<Blocks(count), kThreads, 0, stream>>>(
        x, y, gamma, beta, running_mean, running_var, Index(count), c, hw, epsilon);
  });
  Launched();
}

void BatchNormBackward(const float* dy, const float* xhat, const float* gamma, const float* inv_std,
                       float* dgamma, float* dbeta, float* dx, double* scratch, int n, int c,
                       int hw, cudaStream_t stream) {
  if (c <= 0) return;
  const ChannelLayout l = Layout(n, c, hw);
  double* db_parts = scratch;
  double* dg_parts = scratch + size_t(c) * l.parts;
  BatchNormGradPartsKernel<<<dim3(unsigned(c), unsigned(l.parts)), kThreads, 0, stream>>>(
      dy, xhat, db_parts, dg_parts, l);
  Launched();
  BatchNormGradParamsKernel<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      db_parts, dg_parts, dgamma, dbeta, l);
  Launched();
  const size_t count = size_t(n) * c * hw;
  if (dx == nullptr || count == 0) return;
  WithIndexType(count, [&](auto zero) {
    using Index = decltype(zero);
    BatchNormGradInputKernel<<<Blocks(count), kThreads, 0, stream>>>(
        dy, xhat, gamma, inv_std, dgamma, dbeta, dx, Index(count), c, hw, double(n) * hw);
  });
  Launched();
}

void BatchNormCommit(float* running_mean, float* running_var, const float* stats, int c,
                     double momentum, cudaStream_t stream) {
  BatchNormCommitKernel<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      running_mean, running_var, stats, c, momentum);
  Launched();
}

void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int n, int classes,
                         float scale, float* grad, double* sums, int* bad_label,
                         cudaStream_t stream, double label_smoothing) {
  SoftmaxCrossEntropyKernel<<<1, kThreads, 0, stream>>>(logits, labels, n, classes, scale, grad,
                                                        sums, bad_label, label_smoothing);
  Launched();
}

void AvgPool2dForward(const float* x, float* y, const PoolGeometry& g, cudaStream_t stream) {
  const size_t count = g.planes * size_t(g.out_height) * size_t(g.out_width);
  if (count == 0) return;
  const float inv_area = 1.0f / float(g.kernel * g.kernel);
  WithIndexType(count, [&](auto zero) {
    using Index = decltype(zero);
    AvgPoolForwardKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, g, Index(count), inv_area);
  });
  Launched();
}

void AvgPool2dBackward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t stream) {
  const size_t count = g.planes * size_t(g.height) * size_t(g.width);
  if (count == 0) return;
  const float inv_area = 1.0f / float(g.kernel * g.kernel);
  WithIndexType(count, [&](auto zero) {
    using Index = decltype(zero);
    AvgPoolBackwardKernel<<<Blocks(count), kThreads, 0, stream>>>(dy, dx, g, Index(count),
                                                                  inv_area);
  });
  Launched();
}

void GlobalAvgPool2dForward(const float* x, float* y, size_t planes, size_t area,
                            cudaStream_t stream) {
  if (planes == 0) return;
  GlobalAvgPoolForwardKernel<<<Blocks(planes * kWarp), kThreads, 0, stream>>>(x, y, planes, area);
  Launched();
}

void GlobalAvgPool2dBackward(const float* dy, float* dx, size_t planes, size_t area,
                             cudaStream_t stream) {
  const size_t count = planes * area;
  if (count == 0) return;
  const float inv_area = 1.0f / float(area);
  WithIndexType(count, [&](auto zero) {
    using Index = decltype(zero);
    GlobalAvgPoolBackwardKernel<<<Blocks(count), kThreads, 0, stream>>>(dy, dx, Index(count),
                                                                        Index(area), inv_area);
  });
  Launched();
}

void GeluForward(const float* x, float* y, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  MapKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, count, GeluFn());
  Launched();
}

void GeluBackward(const float* x, const float* dy, float* dx, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  MapGradKernel<<<Blocks(count), kThreads, 0, stream>>>(x, dy, dx, count, GeluGradFn());
  Launched();
}

void SiluForward(const float* x, float* y, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  MapKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, count, SiluFn());
  Launched();
}

void SiluBackward(const float* x, const float* dy, float* dx, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  MapGradKernel<<<Blocks(count), kThreads, 0, stream>>>(x, dy, dx, count, SiluGradFn());
  Launched();
}

void SgdUpdate(float* w, const float* g, float* momentum_buf, const uint8_t* decays, size_t n,
               float lr, float mu, float decay, bool nesterov, cudaStream_t stream) {
  if (n == 0) return;
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(w, g, momentum_buf, decays, n, lr, mu, decay,
                                                nesterov);
  Launched();
}

void AdamUpdate(float* w, const float* g, float* m, float* v, const uint8_t* decays, size_t n,
                float lr, float beta1, float beta2, float c1, float c2, float epsilon, float decay,
                cudaStream_t stream) {
  if (n == 0) return;
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(w, g, m, v, decays, n, lr, beta1, beta2, c1, c2,
                                                 epsilon, decay);
  Launched();
}

}  // namespace cuda
}  // namespace dlh
