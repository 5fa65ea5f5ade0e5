// DLH — inverted dropout: kept elements are scaled by 1/(1-rate) in training, so that
// evaluation is the identity.
//
// The mask has no RNG state: whether element i is kept is a pure function of (seed, rank,
// step, layer index, i), computed with a counter-based hash. A run resumed from a
// checkpoint therefore draws bit-identical masks without saving any generator.

#include <cstdint>

#include "common/error.hpp"
#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/random.hpp"

namespace dlh {
void Dropout::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  BatchSize(in, in_, "dropout");
  out.resize(in.shape());
  const size_t size = in.size();
  mask_.resize(size);
  const float* x = in.data();
  float* y = out.data();
  float* m = mask_.data();
  if (!ctx.training || rate_ <= 0.0) {
    for (size_t i = 0; i < size; ++i) m[i] = 1.0f;
    for (size_t i = 0; i < size; ++i) y[i] = x[i];
    return;
  }
  const uint64_t key = DropoutKey(ctx.seed, ctx.rank, ctx.step, ctx.layer_index);
  const uint64_t threshold = DropoutThreshold(rate_);
  const float scale = float(1.0 / (1.0 - rate_));
  for (size_t i = 0; i < size; ++i) m[i] = DropoutKeeps(key, i, threshold) ? scale : 0.0f;
  for (size_t i = 0; i < size; ++i) y[i] = x[i] * m[i];
}

void Dropout::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                       Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  const size_t size = in.size();
  if (mask_.size() != size) throw Error("dropout: backward without a matching forward");
  grad_in->resize(in.shape());
  const float* g = grad_out.data();
  const float* m = mask_.data();
  float* d = grad_in->data();
  for (size_t i = 0; i < size; ++i) d[i] = g[i] * m[i];
}

}  // namespace dlh
