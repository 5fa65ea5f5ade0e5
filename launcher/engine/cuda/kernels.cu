// DLH — CUDA kernels of the GPU engine (see kernels.hpp).
#include <cmath>

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

// One block per channel: mean, then squared deviations (two passes, as on the CPU).
__global__ void BatchNormStatsKernel(const float* x, float* stats, float* inv_std, int n, int c,
                                     int hw, double epsilon) {
  __shared__ double shared[kThreads];
  const int ch = blockIdx.x;
  const int64_t count = int64_t(n) * hw;
  double sum = 0;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const int64_t b = e / hw, p = e % hw;
    sum += x[(b * c + ch) * hw + p];
  }
  const double mean = count > 0 ? BlockSum(sum, shared) / double(count) : 0.0;
  double sq = 0;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const int64_t b = e / hw, p = e % hw;
    const double d = x[(b * c + ch) * hw + p] - mean;
    sq += d * d;
  }
  sq = BlockSum(sq, shared);
  if (threadIdx.x == 0) {
    const double var = count > 0 ? sq / double(count) : 0.0;
    stats[ch] = float(mean);
    stats[c + ch] = float(count > 1 ? sq / double(count - 1) : var);
    inv_std[ch] = float(1.0 / sqrt(var + epsilon));
  }
}

__global__ void BatchNormNormalizeKernel(const float* x, float* y, float* xhat, const float* stats,
                                         const float* inv_std, const float* gamma,
                                         const float* beta, size_t count, int c, int hw) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const int ch = int((i / hw) % c);
    const float xh = (x[i] - stats[ch]) * inv_std[ch];
    xhat[i] = xh;
    y[i] = gamma[ch] * xh + beta[ch];
  }
}

__global__ void BatchNormInferKernel(const float* x, float* y, const float* gamma,
                                     const float* beta, const float* mean, const float* var,
                                     size_t count, int c, int hw, double epsilon) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const int ch = int((i / hw) % c);
    const double inv = 1.0 / sqrt(double(var[ch]) + epsilon);
    const float scale = float(gamma[ch] * inv);
    const float shift = float(beta[ch] - mean[ch] * gamma[ch] * inv);
    y[i] = x[i] * scale + shift;
  }
}

// One block per channel: dbeta = sum(dy), dgamma = sum(dy * xhat).
__global__ void BatchNormGradParamsKernel(const float* dy, const float* xhat, float* dgamma,
                                          float* dbeta, int n, int c, int hw) {
  __shared__ double shared[kThreads];
  const int ch = blockIdx.x;
  const int64_t count = int64_t(n) * hw;
  double db = 0, dg = 0;
  for (int64_t e = threadIdx.x; e < count; e += kThreads) {
    const int64_t b = e / hw, p = e % hw, i = (b * c + ch) * hw + p;
    db += dy[i];
    dg += double(dy[i]) * xhat[i];
  }
  db = BlockSum(db, shared);
  dg = BlockSum(dg, shared);
  if (threadIdx.x == 0) {
    dbeta[ch] = float(db);
    dgamma[ch] = float(dg);
  }
}

// dx = gamma * inv_std / m * (m * dy - sum(dy) - xhat * sum(dy * xhat)), m = n * hw.
__global__ void BatchNormGradInputKernel(const float* dy, const float* xhat, const float* gamma,
                                         const float* inv_std, const float* dgamma,
                                         const float* dbeta, float* dx, size_t count, int c, int hw,
                                         double m) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x) {
    const int ch = int((i / hw) % c);
    const float k = float(gamma[ch] * inv_std[ch] / m);
    dx[i] = k * (float(m) * dy[i] - dbeta[ch] - xhat[i] * dgamma[ch]);
  }
}

__global__ void BatchNormCommitKernel(float* mean, float* var, const float* stats, int c,
                                      double momentum) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean[ch] = float((1.0 - momentum) * mean[ch] + momentum * stats[ch]);
  var[ch] = float((1.0 - momentum) * var[ch] + momentum * stats[c + ch]);
}

// One block: thread t takes samples t, t + 256, ...; sums combine in a fixed tree.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int n,
                                          int classes, float scale, float* grad, double* sums,
                                          int* bad_label) {
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
    loss += log(sum) - (double(z[label]) - zmax);
    hits += best == label ? 1.0 : 0.0;
    if (grad != nullptr) {
      float* g = grad + size_t(b) * classes;
      const double inv = 1.0 / sum;
      for (int k = 0; k < classes; ++k) {
        const double p = exp(double(z[k]) - zmax) * inv;
        g[k] = float((p - (k == label ? 1.0 : 0.0)) * scale);
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

__global__ void SgdKernel(float* w, const float* g, float* buf, size_t n, float lr, float mu,
                          float decay, bool nesterov) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float d = g[i] + decay * w[i];
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

__global__ void AdamKernel(float* w, const float* g, float* m, float* v, size_t n, float lr,
                           float b1, float b2, float c1, float c2, float eps, float decay) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    w[i] -= decay * w[i] + lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
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

void BatchNormTrainForward(const float* x, float* y, float* xhat, float* stats, float* inv_std,
                           const float* gamma, const float* beta, int n, int c, int hw,
                           double epsilon, cudaStream_t stream) {
  BatchNormStatsKernel<<<c, kThreads, 0, stream>>>(x, stats, inv_std, n, c, hw, epsilon);
  Launched();
  const size_t count = size_t(n) * c * hw;
  if (count == 0) return;
  BatchNormNormalizeKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, xhat, stats, inv_std,
                                                                   gamma, beta, count, c, hw);
  Launched();
}

void BatchNormInferForward(const float* x, float* y, const float* gamma, const float* beta,
                           const float* running_mean, const float* running_var, int n, int c,
                           int hw, double epsilon, cudaStream_t stream) {
  const size_t count = size_t(n) * c * hw;
  if (count == 0) return;
  BatchNormInferKernel<<<Blocks(count), kThreads, 0, stream>>>(x, y, gamma, beta, running_mean,
                                                               running_var, count, c, hw, epsilon);
  Launched();
}

void BatchNormBackward(const float* dy, const float* xhat, const float* gamma, const float* inv_std,
                       float* dgamma, float* dbeta, float* dx, int n, int c, int hw,
                       cudaStream_t stream) {
  BatchNormGradParamsKernel<<<c, kThreads, 0, stream>>>(dy, xhat, dgamma, dbeta, n, c, hw);
  Launched();
  const size_t count = size_t(n) * c * hw;
  if (dx == nullptr || count == 0) return;
  BatchNormGradInputKernel<<<Blocks(count), kThreads, 0, stream>>>(
      dy, xhat, gamma, inv_std, dgamma, dbeta, dx, count, c, hw, double(n) * hw);
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
                         cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<1, kThreads, 0, stream>>>(logits, labels, n, classes, scale, grad,
                                                        sums, bad_label);
  Launched();
}

void SgdUpdate(float* w, const float* g, float* momentum_buf, size_t n, float lr, float mu,
               float decay, bool nesterov, cudaStream_t stream) {
  if (n == 0) return;
  SgdKernel<<<Blocks(n), kThreads, 0, stream>>>(w, g, momentum_buf, n, lr, mu, decay, nesterov);
  Launched();
}

void AdamUpdate(float* w, const float* g, float* m, float* v, size_t n, float lr, float beta1,
                float beta2, float c1, float c2, float epsilon, float decay, cudaStream_t stream) {
  if (n == 0) return;
  AdamKernel<<<Blocks(n), kThreads, 0, stream>>>(w, g, m, v, n, lr, beta1, beta2, c1, c2, epsilon,
                                                 decay);
  Launched();
}

}  // namespace cuda
}  // namespace dlh
