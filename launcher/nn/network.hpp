// DLH — a network built from a spec: the layer stack (layer_stack.hpp: its activations kept
// for backward, no recomputation) and its parameters named for checkpoints.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "common/spec.hpp"
#include "launcher/nn/layer.hpp"
#include "launcher/nn/layer_stack.hpp"
#include "launcher/nn/named_array.hpp"
#include "launcher/nn/optimizer.hpp"

namespace dlh {

class Network {
 public:
  explicit Network(const TrainSpec& spec);
  // The spec's layers [first, last) only: a pipeline stage (launcher/engine/pipeline_engine).
  // Names, initial values and dropout masks keep the whole network's layer indices, so the
  // stages' arrays together are the whole network's, as a checkpoint holds them.
  Network(const TrainSpec& spec, size_t first, size_t last);

  // Deterministic initialization from `seed` (every rank gets the same values; the
  // trainer still broadcasts rank 0's so that nothing depends on that).
  void init(uint64_t seed);

  // Returns the logits (N x classes). `ctx.layer_index` is set per layer.
  const Tensor& forward(const Tensor& input, ForwardContext ctx);

  // Backward from dLoss/dLogits. `on_layer_done(i)` runs right after layer i's parameter
  // gradients are written (layers run last to first), so their allreduce can start.
  void backward(const Tensor& grad_logits, const std::function<void(size_t)>& on_layer_done);
  // The same from dLoss/d(output), also writing dLoss/d(input) into *grad_in (a pipeline
  // stage after the first sends it back).
  void backward(const Tensor& grad_out, Tensor* grad_in,
                const std::function<void(size_t)>& on_layer_done);

  size_t num_layers() const { return stack_.size(); }
  Layer& layer(size_t i) { return stack_.layer(i); }

  // Parameters and buffers named "<2-digit layer index>.<kind>/<name>", in layer order.
  const std::vector<NamedParam>& params() const { return params_; }
  std::vector<NamedArray> export_params() const;
  std::vector<NamedArray> export_buffers() const;
  // Throws CheckpointError naming the first missing or misshapen array.
  void import_params(const std::vector<NamedArray>& arrays);
  void import_buffers(const std::vector<NamedArray>& arrays);
  // Layer index of each entry of params().
  const std::vector<size_t>& param_layer() const { return param_layer_; }
  size_t num_param_values() const;

 private:
  Network(const TrainSpec& spec, size_t first, size_t last, const std::vector<Shape3>& shapes);

  size_t first_ = 0;  // the spec's index of stack_'s first layer
  LayerStack stack_;
  std::vector<NamedParam> params_;
  std::vector<size_t> param_layer_;
  struct NamedBuffer {
    std::string name;
    Tensor* value;
  };
  std::vector<NamedBuffer> buffers_;
};

}  // namespace dlh
