// DLH — flatten: N x C x H x W -> N x (C*H*W). NCHW is already sample-major, so this is
// a copy under a new shape (Tensor has no views).

#include <algorithm>

#include "launcher/layers/layers.hpp"

namespace dlh {

void Flatten::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "flatten");
  out.resize({n, int(in_.elements())});
  std::copy(in.values().begin(), in.values().end(), out.values().begin());
}

void Flatten::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                       Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape());
  std::copy(grad_out.values().begin(), grad_out.values().end(), grad_in->values().begin());
}

}  // namespace dlh
