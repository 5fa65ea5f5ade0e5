// DLH — the GPU network's layers in order, with the device memory between them: an
// activation array per layer and the two gradient arrays that backward alternates between.
// Also each path of a residual block (gpu_residual.hpp), which takes its output gradient
// from the block and may have to give the block its input gradient.
//
// A layer whose output is its input (GpuLayer::output_is_input: flatten, dropout at rate
// 0) gets no activation array: its output is the memory its input is in, and its input
// gradient is its output gradient, so it costs no kernel and no copy. That memory belongs
// to whoever holds the input: an earlier layer's activation array, owned here and never
// reallocated, or the caller's input array, which must hold its values until backward()
// has returned (the engine's input_ is rewritten only by the next step's stage()).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "launcher/engine/cuda/gpu_layers.hpp"

namespace dlh {
namespace cuda {

class GpuStack {
 public:
  // `shapes`: the per-sample shapes of LayerShapes(), the input's first, one more than
  // `layers`; `max_batch` bounds n.
  // `stream`: where backward copies an input gradient that is its output gradient (a path
  // of a residual block that starts with a flatten or dropout at rate 0); the network's
  // own stack never does.
  GpuStack(std::vector<std::unique_ptr<GpuLayer>> layers, const std::vector<Shape3>& shapes,
           int max_batch, cudaStream_t stream = nullptr);

  size_t size() const { return layers_.size(); }
  GpuLayer& layer(size_t i) { return *layers_[i]; }

  // Every layer's choices for batch n (GpuLayer::plan), made before the first step.
  void plan(int n) {
    for (auto& l : layers_) l->plan(n);
  }
  // Runs every layer on the n samples at `input` (see above for how long it must live).
  // Layer i gets ForwardContext::layer_index i, or index_of(i) (a residual block's paths).
  void forward(const float* input, int n, ForwardContext ctx,
               const std::function<int(size_t)>& index_of = nullptr);
  // Layer i's output of the last forward(); output() is the network's.
  const float* output(size_t i) const { return outputs_[i]; }
  const float* output() const { return outputs_.back(); }

  // Where the loss writes dLoss/d(output()) before backward().
  float* output_gradient() { return grad_a_.get(); }
  // Backward through every layer, the last first, for the last (training) forward();
  // layer_done(k) follows layer k's. The first layer computes no input gradient.
  void backward(int n, const std::function<void(size_t)>& layer_done);
  // The same from the output gradient `dy` (n samples; only read), writing dLoss/d(input)
  // into `dx` (n samples of the input shape), or computing none when dx is null.
  void backward(const float* dy, float* dx, int n, const std::function<void(size_t)>& layer_done);
  // Where dLoss/d(output(k)) was during the last backward(). The two arrays alternate, so
  // afterwards gradient(0) and gradient(1) still hold their values, later ones may not.
  const float* gradient(size_t k) const { return gradients_[k]; }

  // While set, forward() and backward() mark each layer's passes on it (step_timer.hpp),
  // layer i as i: only the network's own stack, not a residual block's paths.
  void set_timer(GpuStepTimer* timer) { timer_ = timer; }

 private:
  std::vector<std::unique_ptr<GpuLayer>> layers_;
  cudaStream_t stream_;
  size_t input_values_ = 0;               // per sample, of the stack's input
  std::vector<DeviceArray<float>> acts_;  // empty for output_is_input() layers
  DeviceArray<float> grad_a_, grad_b_;
  const float* input_ = nullptr;         // of the last forward()
  std::vector<const float*> outputs_;    // per layer, of the last forward()
  std::vector<const float*> gradients_;  // per layer, of the last backward()
  GpuStepTimer* timer_ = nullptr;
};

}  // namespace cuda
}  // namespace dlh
