// DLH — network assembly, forward and backward over the layer stack.
#include "launcher/nn/network.hpp"

#include <cstdio>
#include <map>

#include "common/error.hpp"
#include "launcher/nn/layers/fuse.hpp"

namespace dlh {
namespace {

std::string LayerPrefix(size_t index, LayerKind kind) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02zu.%s/", index, LayerKindName(kind));
  return buf;
}

NamedArray ToArray(const std::string& name, const Tensor& t) {
  return NamedArray{name, t.shape(), t.to_vector()};
}

void Import(const std::string& name, Tensor* into,
            const std::map<std::string, const NamedArray*>& by) {
  auto it = by.find(name);
  if (it == by.end()) throw CheckpointError("array '" + name + "' is missing");
  if (it->second->shape != into->shape())
    throw CheckpointError("array '" + name + "' has a different shape than the spec's layer");
  into->assign(it->second->data);
}

}  // namespace

Network::Network(const TrainSpec& spec) {
  std::vector<Shape3> shapes = LayerShapes(spec);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    layers_.push_back(MakeLayer(spec.layers[i], shapes[i]));
    std::string prefix = LayerPrefix(i, spec.layers[i].kind);
    for (ParamRef p : layers_.back()->params()) {
      params_.push_back(NamedParam{prefix + p.name, p});
      param_layer_.push_back(i);
    }
    for (BufferRef b : layers_.back()->buffers()) buffers_.push_back({prefix + b.name, b.value});
  }
  // A ReLU and a 2x2 max pool after a convolution run inside it (layers/fuse.hpp): same
  // values, several passes over the largest activations fewer. The parameters' names and
  // the layer indices stay the spec's.
  for (size_t i = 0; i < layers_.size();) i += 1 + FuseFollowers(layers_, i);
  acts_.resize(layers_.size());
  grads_.resize(layers_.size());
  bool params_before = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    needs_grad_in_.push_back(params_before);
    params_before = params_before || !layers_[i]->params().empty();
  }
}

void Network::init(uint64_t seed) {
  // One generator per layer, seeded from (seed, layer): adding a layer does not shift
  // the initial values of the others.
  for (size_t i = 0; i < layers_.size(); ++i) {
    std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(i), 0x444c48u};
    std::mt19937_64 rng(seq);
    layers_[i]->init(rng);
  }
}

const Tensor& Network::forward(const Tensor& input, ForwardContext ctx) {
  input_ = &input;
  const Tensor* x = &input;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (FusedIntoPrevious(*layers_[i])) continue;  // *x is already this layer's output
    ctx.layer_index = int(i);
    layers_[i]->forward(*x, acts_[i], ctx);
    x = &acts_[i];
  }
  return *x;
}

void Network::backward(const Tensor& grad_logits,
                       const std::function<void(size_t)>& on_layer_done) {
  const Tensor* grad_out = &grad_logits;
  for (size_t k = layers_.size(); k-- > 0;) {
    if (FusedIntoPrevious(*layers_[k])) {
      // The layer that runs it takes *grad_out as it is; no parameters here.
      if (on_layer_done) on_layer_done(k);
      continue;
    }
    // The input of layer k: the output of the nearest layer before it that runs.
    size_t below = k;
    while (below > 0 && FusedIntoPrevious(*layers_[below - 1])) --below;
    const Tensor& in = below == 0 ? *input_ : acts_[below - 1];
    const Tensor& out = acts_[k];
    // Nothing before layer k has parameters: its input gradient would be thrown away.
    if (!needs_grad_in_[k]) {
      layers_[k]->backward(in, out, *grad_out, nullptr);
      if (on_layer_done) on_layer_done(k);
      // Layers below have no parameters and no gradients to report; they still get their
      // callback, in order, as before.
      for (size_t j = k; j-- > 0;)
        if (on_layer_done) on_layer_done(j);
      return;
    }
    Tensor* grad_in = &grads_[k];
    layers_[k]->backward(in, out, *grad_out, grad_in);
    if (on_layer_done) on_layer_done(k);
    grad_out = grad_in;
  }
}

std::vector<NamedArray> Network::export_params() const {
  std::vector<NamedArray> out;
  for (const auto& p : params_) out.push_back(ToArray(p.name, *p.ref.value));
  return out;
}

std::vector<NamedArray> Network::export_buffers() const {
  std::vector<NamedArray> out;
  for (const auto& b : buffers_) out.push_back(ToArray(b.name, *b.value));
  return out;
}

void Network::import_params(const std::vector<NamedArray>& arrays) {
  std::map<std::string, const NamedArray*> by;
  for (const auto& a : arrays) by[a.name] = &a;
  for (auto& p : params_) Import(p.name, p.ref.value, by);
}

void Network::import_buffers(const std::vector<NamedArray>& arrays) {
  std::map<std::string, const NamedArray*> by;
  for (const auto& a : arrays) by[a.name] = &a;
  for (auto& b : buffers_) Import(b.name, b.value, by);
}

size_t Network::num_param_values() const {
  size_t n = 0;
  for (const auto& p : params_) n += p.ref.value->size();
  return n;
}

}  // namespace dlh
