// DLH — network assembly, forward and backward over the layer stack.
#include "launcher/nn/network.hpp"

#include <cstdio>
#include <map>

#include "common/error.hpp"

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

Network::Network(const TrainSpec& spec) : Network(spec, 0, spec.layers.size()) {}

Network::Network(const TrainSpec& spec, size_t first, size_t last)
    : Network(spec, first, last, LayerShapes(spec)) {}

Network::Network(const TrainSpec& spec, size_t first, size_t last,
                 const std::vector<Shape3>& shapes)
    : first_(first),
      stack_(std::vector<LayerSpec>(spec.layers.begin() + long(first),
                                    spec.layers.begin() + long(last)),
             std::vector<Shape3>(shapes.begin() + long(first), shapes.begin() + long(last) + 1)) {
  for (size_t i = 0; i < stack_.size(); ++i) {
    const std::string prefix = LayerPrefix(first + i, spec.layers[first + i].kind);
    for (ParamRef p : stack_.layer(i).params()) {
      params_.push_back(NamedParam{prefix + p.name, p});
      param_layer_.push_back(i);
    }
    for (BufferRef b : stack_.layer(i).buffers()) buffers_.push_back({prefix + b.name, b.value});
  }
}

void Network::init(uint64_t seed) {
  // One generator per layer, seeded from (seed, layer): adding a layer does not shift
  // the initial values of the others.
  for (size_t i = 0; i < stack_.size(); ++i) {
    std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(first_ + i), 0x444c48u};
    std::mt19937_64 rng(seq);
    stack_.layer(i).init(rng);
  }
}

const Tensor& Network::forward(const Tensor& input, ForwardContext ctx) {
  return stack_.forward(input, ctx, [this](size_t i) { return int(first_ + i); });
}

void Network::backward(const Tensor& grad_logits,
                       const std::function<void(size_t)>& on_layer_done) {
  // Nobody wants the gradient of the input images.
  stack_.backward(grad_logits, nullptr, on_layer_done);
}

void Network::backward(const Tensor& grad_out, Tensor* grad_in,
                       const std::function<void(size_t)>& on_layer_done) {
  stack_.backward(grad_out, grad_in, on_layer_done);
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
