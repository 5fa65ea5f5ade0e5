// DLH — the layer interface of the CPU training engine.
//
// Every layer works on a whole local batch: activations are N x C x H x W, or N x F
// after flatten/dense. Parameter gradients are OVERWRITTEN by backward (one batch per
// step); the loss is scaled by 1/global_batch so that summing gradients over ranks
// gives the global mean gradient exactly (see trainer.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/nn/tensor.hpp"

namespace dlh {

struct ForwardContext {
  bool training = false;
  uint64_t seed = 0;  // spec seed
  uint64_t step = 0;  // global step (dropout masks are a pure function of seed/rank/step/layer)
  int rank = 0;
  int layer_index = 0;  // position in the spec's layer list
};

struct ParamRef {
  std::string name;  // "weight", "bias", "gamma", "beta"
  Tensor* value;
  Tensor* grad;
  bool decay;  // weight decay applies (weights), or not (biases, batchnorm)
};

struct BufferRef {  // persistent state that is not trained (batchnorm running stats)
  std::string name;
  Tensor* value;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual LayerKind kind() const = 0;
  virtual Shape3 output_shape() const = 0;  // per sample

  // Initializes parameters (He/Kaiming for conv and dense, ones/zeros for batchnorm).
  virtual void init(std::mt19937_64& rng) { (void)rng; }

  virtual void forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) = 0;

  // Writes parameter gradients and, when grad_in is not null, dLoss/dIn. `in` and `out`
  // are the tensors of the last training forward call.
  virtual void backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                        Tensor* grad_in) = 0;

  virtual std::vector<ParamRef> params() { return {}; }
  virtual std::vector<BufferRef> buffers() { return {}; }

  // Batchnorm: per-channel batch mean and variance (2*C values) of the last training
  // forward. The trainer replaces them by the cross-rank average, then calls
  // commit_batch_stats() to fold them into the running statistics, which keeps every
  // rank's running statistics bit-identical.
  virtual Tensor* batch_stats() { return nullptr; }
  virtual void commit_batch_stats() {}
};

// Builds a layer for an input of per-sample shape `in`. Throws SpecError on misuse.
std::unique_ptr<Layer> MakeLayer(const LayerSpec& spec, const Shape3& in);

// Softmax cross-entropy over logits (N x classes). Writes grad_logits = (softmax -
// target) * scale, returns the SUM of per-sample losses (unscaled) and adds the number
// of correct argmax predictions to *correct. The target is one-hot, or with
// label_smoothing s, 1 - s + s/classes on the label and s/classes elsewhere.
double SoftmaxCrossEntropy(const Tensor& logits, const int32_t* labels, float scale,
                           Tensor* grad_logits, int64_t* correct, double label_smoothing = 0.0);

}  // namespace dlh
