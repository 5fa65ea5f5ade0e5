// DLH — a list of layers run one after the other: the network's own list, and each path of a
// residual block. It builds the layers from their specs, fuses what a convolution can run
// itself (layers/fuse.hpp), keeps every activation for backward and names the parameters.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/spec.hpp"
#include "launcher/nn/layer.hpp"

namespace dlh {

class LayerStack {
 public:
  // `shapes` are the per-sample shapes through `specs` (PathShapes or LayerShapes: size
  // specs.size() + 1, [0] the input).
  LayerStack(const std::vector<LayerSpec>& specs, const std::vector<Shape3>& shapes);

  size_t size() const { return layers_.size(); }
  Layer& layer(size_t i) { return *layers_[i]; }
  const Layer& layer(size_t i) const { return *layers_[i]; }
  // Whether some layer has parameters (then backward has gradients to write).
  bool has_params() const { return !params_before_.empty() && params_before_.back(); }

  // Runs every layer on `input`, which must stay alive until backward. `index_of(i)` gives
  // layer i's ForwardContext::layer_index (dropout masks are keyed by it).
  const Tensor& forward(const Tensor& input, ForwardContext ctx,
                        const std::function<int(size_t)>& index_of);

  // Backward from dLoss/d(output). Writes dLoss/d(input) into *grad_in, or skips it (and the
  // input gradients of the parameterless layers at the bottom) when grad_in is null.
  // `on_layer_done(i)` runs once per layer, last to first, right after layer i's parameter
  // gradients are written.
  void backward(const Tensor& grad_out, Tensor* grad_in,
                const std::function<void(size_t)>& on_layer_done);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor> acts_;  // acts_[i] = output of layer i
  const Tensor* input_ = nullptr;
  // grads_[k] = dLoss/d(input of layer k). One tensor per layer instead of two reused
  // ones: a tensor that changed size every step would be re-filled with zeros when it grows
  // back (std::vector::resize), an extra pass over the largest gradients.
  std::vector<Tensor> grads_;
  // params_before_[k]: layer k or one before it has parameters. Below the lowest such layer,
  // an input gradient is only wanted when the caller asks for the stack's own.
  std::vector<bool> params_before_;
};

}  // namespace dlh
