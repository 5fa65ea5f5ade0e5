// DLH — rectified linear unit, element-wise, over the engine's threads.
//
// Both loops are written without a data-dependent branch (select, not if) so that the
// compiler vectorises them: with random signs a branch mispredicts half the time.

#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

constexpr size_t kGrain = 32768;  // elements per block: a few tens of microseconds

}  // namespace

void Relu::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  BatchSize(in, in_, "relu");
  out.resize(in.shape());
  const float* x = in.data();
  float* y = out.data();
  ParallelRange(in.size(), kGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  });
}

void Relu::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape());
  const float* x = in.data();
  const float* g = grad_out.data();
  float* d = grad_in->data();
  // The derivative at exactly 0 is taken as 0, as in PyTorch.
  ParallelRange(in.size(), kGrain, [&](size_t lo, size_t hi) {
    for (size_t i = lo; i < hi; ++i) {
      const float gi = g[i];  // loaded unconditionally: lets the loop vectorise
      d[i] = x[i] > 0.0f ? gi : 0.0f;
    }
  });
}

}  // namespace dlh
