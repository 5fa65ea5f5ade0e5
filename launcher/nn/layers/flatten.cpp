// DLH — flatten: N x C x H x W -> N x (C*H*W). NCHW is already sample-major, so this is
// a copy under a new shape (Tensor has no views), split over the engine's threads.

#include <algorithm>

#include "launcher/nn/layers/layers.hpp"
#include "launcher/nn/thread_pool.hpp"

namespace dlh {
namespace {

void Copy(const Tensor& from, Tensor& to) {
  const float* src = from.data();
  float* dst = to.data();
  ParallelRange(from.size(), 65536,
                [&](size_t lo, size_t hi) { std::copy(src + lo, src + hi, dst + lo); });
}

}  // namespace

void Flatten::forward(const Tensor& in, Tensor& out, const ForwardContext& ctx) {
  (void)ctx;
  const int n = BatchSize(in, in_, "flatten");
  out.resize({n, int(in_.elements())});
  Copy(in, out);
}

void Flatten::backward(const Tensor& in, const Tensor& out, const Tensor& grad_out,
                       Tensor* grad_in) {
  (void)out;
  if (grad_in == nullptr) return;
  grad_in->resize(in.shape());
  Copy(grad_out, *grad_in);
}

}  // namespace dlh
