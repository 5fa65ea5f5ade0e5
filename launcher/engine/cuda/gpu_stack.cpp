// DLH — the GPU network's layers and the memory between them (see gpu_stack.hpp).
#include "launcher/engine/cuda/gpu_stack.hpp"

#include <algorithm>
#include <utility>

namespace dlh {
namespace cuda {

GpuStack::GpuStack(std::vector<std::unique_ptr<GpuLayer>> layers, const std::vector<Shape3>& shapes,
                   int max_batch, cudaStream_t stream)
    : layers_(std::move(layers)),
      stream_(stream),
      outputs_(layers_.size()),
      gradients_(layers_.size()) {
  if (shapes.size() != layers_.size() + 1)
    throw Error("GPU layers: one shape per layer and the input's expected (internal)");
  input_values_ = size_t(shapes[0].elements());
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

void GpuStack::forward(const float* input, int n, ForwardContext ctx,
                       const std::function<int(size_t)>& index_of) {
  input_ = input;
  const float* x = input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    // The layer does not write its output when it is its input: the const_cast gives it
    // the pointer its interface takes, nothing writes through it.
    float* y = layers_[i]->output_is_input() ? const_cast<float*>(x) : acts_[i].get();
    ctx.layer_index = index_of ? index_of(i) : int(i);
    if (timer_ != nullptr) timer_->mark(int(i), "forward");
    layers_[i]->forward(x, y, n, ctx);
    outputs_[i] = y;
    x = y;
  }
}

void GpuStack::backward(int n, const std::function<void(size_t)>& layer_done) {
  backward(grad_a_.get(), nullptr, n, layer_done);
}

void GpuStack::backward(const float* dy, float* dx_input, int n,
                        const std::function<void(size_t)>& layer_done) {
  for (size_t k = layers_.size(); k-- > 0;) {
    gradients_[k] = dy;
    const float* x = k == 0 ? input_ : outputs_[k - 1];
    // The first layer's input gradient goes to dx_input, or nowhere when nobody reads it; a
    // layer whose output is its input passes the gradient on where it is; any other writes
    // to the array dy is not in.
    float* dx = nullptr;
    if (k == 0)
      dx = dx_input;
    else if (layers_[k]->output_is_input())
      dx = const_cast<float*>(dy);  // nothing writes through it (see forward)
    else
      dx = dy == grad_a_.get() ? grad_b_.get() : grad_a_.get();
    if (timer_ != nullptr) timer_->mark(int(k), "backward");
    if (k == 0 && dx != nullptr && layers_[k]->output_is_input()) {
      // Its input gradient is dy itself, wanted in the caller's array.
      if (stream_ == nullptr) throw Error("GPU layers: a stack without a stream copied (internal)");
      CUDA_CHECK(cudaMemcpyAsync(dx, dy, size_t(n) * input_values_ * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream_));
    } else {
      layers_[k]->backward(x, outputs_[k], dy, dx, n);
    }
    if (layer_done) layer_done(k);
    dy = dx;
  }
}

}  // namespace cuda
}  // namespace dlh
