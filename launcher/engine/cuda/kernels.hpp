// DLH — the engine's own CUDA kernels, for the steps no library call fits: bias and
// dropout, batch normalisation with DLH's cross-rank statistics, softmax cross-entropy,
// average pooling, GELU and SiLU, and the optimizer updates. Host functions that enqueue
// on `stream`; all arrays are on the device. Every reduction has a fixed shape (a block
// count that depends on the tensor shape alone, fixed thread count, fixed combine order),
// so results do not depend on scheduling: a resumed run repeats the uninterrupted one bit
// for bit on the same GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dlh {
namespace cuda {

// y[b][f] += bias[f] for an n x features matrix.
void AddBias(float* y, const float* bias, int n, int features, cudaStream_t stream);

// Training: y = x * mask with mask = scale or 0 by DropoutKeeps(key, i, threshold).
void DropoutForward(const float* x, float* y, float* mask, size_t count, uint64_t key,
                    uint64_t threshold, float scale, cudaStream_t stream);
void Multiply(const float* a, const float* b, float* out, size_t count, cudaStream_t stream);

// Batchnorm over N x C x HW. The per-channel sums run on a grid of channels x parts of
// N*HW; `scratch` (BatchNormScratchSize(c) doubles, owned by the layer) holds the parts'
// partial sums, which a second kernel adds in a fixed order. Training forward writes y,
// xhat, stats = {mean[C], unbiased var[C]} and inv_std[C] (of the biased variance, for
// normalising).
size_t BatchNormScratchSize(int c);
void BatchNormTrainForward(const float* x, float* y, float* xhat, float* stats, float* inv_std,
                           const float* gamma, const float* beta, double* scratch, int n, int c,
                           int hw, double epsilon, cudaStream_t stream);
void BatchNormInferForward(const float* x, float* y, const float* gamma, const float* beta,
                           const float* running_mean, const float* running_var, int n, int c,
                           int hw, double epsilon, cudaStream_t stream);
// dx may be null (first layer).
void BatchNormBackward(const float* dy, const float* xhat, const float* gamma, const float* inv_std,
                       float* dgamma, float* dbeta, float* dx, double* scratch, int n, int c,
                       int hw, cudaStream_t stream);
void BatchNormCommit(float* running_mean, float* running_var, const float* stats, int c,
                     double momentum, cudaStream_t stream);

// Softmax cross-entropy of n x classes logits. grad (may be null) = (softmax - q) * scale,
// q the target: one-hot, or with label_smoothing s, 1 - s + s/classes on the label and
// s/classes elsewhere (loss (1 - s) * -log p_label + s * mean_k -log p_k; s = 0 is the
// unsmoothed arithmetic exactly). sums[0] = summed loss, sums[1] = argmax hits;
// *bad_label = 1 + the index of a sample whose label is out of range (0: none).
void SoftmaxCrossEntropy(const float* logits, const int32_t* labels, int n, int classes,
                         float scale, float* grad, double* sums, int* bad_label,
                         cudaStream_t stream, double label_smoothing = 0);

// Average pooling of `planes` H x W planes (n * channels of NCHW) into Ho x Wo, square
// window `kernel`, stride, zero padding; every window divides by kernel * kernel (PyTorch's
// count_include_pad), as launcher/nn/layers/avgpool2d.cpp.
struct PoolGeometry {
  size_t planes;
  int height, width, out_height, out_width;
  int kernel, stride, padding;
};
// One thread per output value, its window summed row by row.
void AvgPool2dForward(const float* x, float* y, const PoolGeometry& g, cudaStream_t stream);
// One thread per input value, gathering the shares of the windows that hold it in the
// order (oh, ow) the CPU scatters them: no atomics, the same bits for any launch.
void AvgPool2dBackward(const float* dy, float* dx, const PoolGeometry& g, cudaStream_t stream);
// y[p] = the mean of plane p (`area` values), summed in double by one warp per plane in a
// fixed order (lane strides, then a fixed shuffle tree).
void GlobalAvgPool2dForward(const float* x, float* y, size_t planes, size_t area,
                            cudaStream_t stream);
// dx = dy[plane] * (1 / area) over each plane (a float reciprocal, as the CPU).
void GlobalAvgPool2dBackward(const float* dy, float* dx, size_t planes, size_t area,
                             cudaStream_t stream);

// Element-wise GELU (exact, erf) and SiLU (x * sigmoid(x)) and their input gradients
// dx = dy * f'(x), in the forms of launcher/nn/layers/smooth_activation.cpp.
void GeluForward(const float* x, float* y, size_t count, cudaStream_t stream);
void GeluBackward(const float* x, const float* dy, float* dx, size_t count, cudaStream_t stream);
void SiluForward(const float* x, float* y, size_t count, cudaStream_t stream);
void SiluBackward(const float* x, const float* dy, float* dx, size_t count, cudaStream_t stream);

// SGD with optional momentum buffer (null: plain), Nesterov, L2 decay; Adam with
// decoupled decay (decay = lr * weight_decay) and bias corrections c1, c2.
//
// One launch updates every parameter of the engine's flat arrays: each parameter starts
// at a multiple of kParamAlign floats there, so every chunk of kParamAlign elements
// belongs to one parameter (or to an alignment gap, whose zeros stay zero), and
// decays[i / kParamAlign] != 0 says whether element i takes weight decay (biases and
// batchnorm do not). decays null: every element does.
constexpr size_t kParamAlign = 64;  // floats: 256 bytes, the alignment cuDNN and cuBLAS like
void SgdUpdate(float* w, const float* g, float* momentum_buf, const uint8_t* decays, size_t n,
               float lr, float mu, float decay, bool nesterov, cudaStream_t stream);
void AdamUpdate(float* w, const float* g, float* m, float* v, const uint8_t* decays, size_t n,
                float lr, float beta1, float beta2, float c1, float c2, float epsilon, float decay,
                cudaStream_t stream);

void Fill(float* p, float value, size_t count, cudaStream_t stream);

}  // namespace cuda
}  // namespace dlh
