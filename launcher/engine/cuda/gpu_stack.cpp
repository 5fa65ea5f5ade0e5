// DLH — the GPU network's layers and the memory between them (see gpu_stack.hpp).
#include "launcher/engine/cuda/gpu_stack.hpp"

#include <algorithm>
#include <utility>

namespace dlh {
namespace cuda {

GpuStack::GpuStack(std::vector<std::unique_ptr<GpuLayer>> layers, const std::vector<Shape3>& shapes,
                   int max_batch)
    : layers_(std::move(layers)), outputs_(layers_.size()), gradients_(layers_.size()) {
  if (shapes.size() != layers_.size() + 1)
    throw Error("GPU layers: one shape per layer and the input's expected (internal)");
  const size_t batch = size_t(std::max(max_batch, 1));
  size_t widest = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const size_t values = batch * size_t(shapes[i + 1].elements());
    acts_.emplace_back(layers_[i]->output_is_input() ? 0 : values);
    widest = std::max(widest, values);
  }
  grad_a_.resize(std::max<size_t>(widest, 1));
  grad_b_.resize(std::max<size_t>(widest, 1));
}

void GpuStack::forward(const float* input, int n, ForwardContext ctx) {
  input_ = input;
  const float* x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // The layer does not write its output when it is its input: the const_cast gives it
    // the pointer its interface takes, nothing writes through it.
    float* y = layers_[i]->output_is_input() ? const_cast<float*>(x) : acts_[i].get();
    ctx.layer_index = int(i);
    layers_[i]->forward(x, y, n, ctx);
    outputs_[i] = y;
    x = y;
  }
}

void GpuStack::backward(int n, const std::function<void(size_t)>& layer_done) {
  float* dy = grad_a_.get();
  for (size_t k = layers_.size(); k-- > 0;) {
    gradients_[k] = dy;
    const float* x = k == 0 ? input_ : outputs_[k - 1];
    // The first layer's input gradient nobody reads; a layer whose output is its input
    // passes the gradient on where it is; any other writes to the array dy is not in.
    float* dx = nullptr;
    if (k > 0 && layers_[k]->output_is_input())
      dx = dy;
    else if (k > 0)
      dx = dy == grad_a_.get() ? grad_b_.get() : grad_a_.get();
    layers_[k]->backward(x, outputs_[k], dy, dx, n);
    layer_done(k);
    dy = dx;
  }
}

}  // namespace cuda
}  // namespace dlh
