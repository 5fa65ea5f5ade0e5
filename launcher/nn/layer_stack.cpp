// DLH — layers run in sequence (see layer_stack.hpp).
#include "launcher/nn/layer_stack.hpp"

#include "launcher/nn/layers/fuse.hpp"

namespace dlh {

LayerStack::LayerStack(const std::vector<LayerSpec>& specs, const std::vector<Shape3>& shapes) {
  for (size_t i = 0; i < specs.size(); ++i) layers_.push_back(MakeLayer(specs[i], shapes[i]));
  // A ReLU and a 2x2 max pool after a convolution run inside it (layers/fuse.hpp): same
  // values, several passes over the largest activations fewer. The parameters' names and
  // the layer indices stay the spec's.
  for (size_t i = 0; i < layers_.size();) i += 1 + FuseFollowers(layers_, i);
  acts_.resize(layers_.size());
  grads_.resize(layers_.size());
  bool params = false;
  for (const auto& layer : layers_) {
    params = params || !layer->params().empty();
    params_before_.push_back(params);
  }
}

const Tensor& LayerStack::forward(const Tensor& input, ForwardContext ctx,
                                  const std::function<int(size_t)>& index_of) {
  input_ = &input;
  const Tensor* x = &input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (FusedIntoPrevious(*layers_[i])) continue;  // *x is already this layer's output
    ctx.layer_index = index_of(i);
    layers_[i]->forward(*x, acts_[i], ctx);
    x = &acts_[i];
  }
  return *x;
}

void LayerStack::backward(const Tensor& grad_out, Tensor* grad_in,
                          const std::function<void(size_t)>& on_layer_done) {
  const Tensor* g = &grad_out;
  for (size_t k = layers_.size(); k-- > 0;) {
    if (FusedIntoPrevious(*layers_[k])) {
      // The layer that runs it takes *g as it is; no parameters here.
      if (on_layer_done) on_layer_done(k);
      continue;
    }
    // The input of layer k: the output of the nearest layer before it that runs.
    size_t below = k;
    while (below > 0 && FusedIntoPrevious(*layers_[below - 1])) --below;
    const Tensor& in = below == 0 ? *input_ : acts_[below - 1];
    const bool wanted = grad_in != nullptr || (k > 0 && params_before_[k - 1]);
    if (!wanted) {
      // Nothing below has parameters and the caller does not want the input gradient: the
      // layers below still get their callbacks, in order.
      layers_[k]->backward(in, acts_[k], *g, nullptr);
      for (size_t j = k + 1; j-- > 0;)
        if (on_layer_done) on_layer_done(j);
      return;
    }
    Tensor* into = below == 0 && grad_in != nullptr ? grad_in : &grads_[k];
    layers_[k]->backward(in, acts_[k], *g, into);
    if (on_layer_done) on_layer_done(k);
    g = into;
  }
}

}  // namespace dlh
