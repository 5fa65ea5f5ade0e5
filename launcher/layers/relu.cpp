// DLH — rectified linear unit, element-wise.

#include "launcher/layers/layers.hpp"

namespace dlh {

void Relu::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  BatchSize(in, in_, "relu");
  out.resize(in.shape());
  const float* x = in.data();
  float* y = out.data();
  const size_t size = in.size();
  for (size_t i = 0; i < size; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void Relu::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out, Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape());
  const float* x = in.data();
  const float* g = grad_out.data();
  float* d = grad_in->data();
  const size_t size = in.size();
  // The derivative at exactly 0 is taken as 0, as in PyTorch.
  for (size_t i = 0; i < size; ++i) d[i] = x[i] > 0.0f ? g[i] : 0.0f;
}

}  // namespace dlh
