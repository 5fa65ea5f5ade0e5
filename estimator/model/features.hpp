// DLH estimator — what a training spec costs: FLOPs, parameters and activations per
// sample, by layer kind. Pure arithmetic on the spec (no engine, no MPI), so the SPANK
// plugin can use it.
//
// Conventions: one multiply-add = 2 FLOPs. "Activations" are the elements each layer
// outputs per sample (the input counts once). Backward of the first layer computes no input
// gradient (the engine skips it), so its backward FLOPs are the weight gradient only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

struct LayerCost {
  LayerKind kind;
  Shape3 in, out;        // per sample
  double flops_fwd = 0;  // per sample
  double flops_bwd = 0;  // per sample (weight + input gradients)
  double params = 0;     // trained values
  double out_elements = 0;
  double workspace_elements = 0;  // per sample: conv2d im2col buffers the engine keeps
  bool cpu_fused = false;         // the CPU engine runs it inside the convolution before it
  // Per sample, the elements (4 bytes each: floats, or int32 pool winners) the CPU engine
  // keeps for this layer from forward to backward: its output unless the next layer runs
  // inside it, its input gradient where one is computed (each layer has its own), and its
  // scratch (batchnorm's normalised input, dropout's mask, max pooling's winners). A
  // residual block's include its paths' layers' and the shortcut's gradient.
  double cpu_held_elements = 0;
  // Whatever the batch, on the CPU engine: one thread's column tiles (ModelFeatures::
  // cpu_conv_scratch_elements), and the weights a convolution's gradient partial sums
  // repeat (min(batch, 8) times). A residual block's: its paths' sums.
  double cpu_scratch_elements = 0;
  double conv_weight_elements = 0;
  // A residual block: the costs of its main path and of its shortcut (empty: the identity),
  // each layer as above. The block's own figures are their sums plus the addition, so that
  // ModelFeatures::layers keeps one entry per layer of the spec's top-level list.
  std::vector<LayerCost> layers, shortcut;
};

struct ModelFeatures {
  // Per-sample FLOPs split by the kind of kernel that executes them (they run at very
  // different rates: GEMM-bound convolution/dense vs memory-bound element-wise work).
  double conv_flops_fwd = 0, conv_flops_bwd = 0;
  double dense_flops_fwd = 0, dense_flops_bwd = 0;
  // pools, activations, batchnorm, dropout, residual additions, loss
  double other_flops_fwd = 0, other_flops_bwd = 0;
  double activation_elements = 0;  // per sample, input included
  double params = 0;               // trained values
  // The sums are int64: each layer may have up to INT_MAX filters or units, and two such
  // layers overflowed an int (undefined behaviour, on any spec ParseSpec accepts).
  int conv_layers = 0;
  int64_t total_filters = 0;  // sum of conv2d filters
  int dense_layers = 0;
  int64_t dense_nodes = 0;  // sum of dense units
  int64_t input_elements = 0;
  // Per sample: the im2col column buffers every conv2d layer of the engine keeps between
  // steps (C*K*K*Ho*Wo for forward, as much again for the input gradient except in the
  // first layer). Used by TrainingMemoryBytes; kept in calibration files.
  double conv_workspace_elements = 0;
  // Per sample, conv2d output elements (F x Ho x Wo summed over conv layers): the size of
  // the forward GEMM's result. FLOPs / inner dimension = 2 x this, so a GEMM with a short
  // inner dimension (C x K x K, small for first layers) costs more than its FLOPs say.
  double conv_output_elements = 0;
  // Per sample, conv2d weights (F x C x K x K summed over conv layers, biases left out). The
  // CPU engine runs a convolution one sample at a time (launcher/nn/layers/conv2d.cpp), so
  // every sample's GEMMs read the weights (forward, input gradient) and add into the
  // weight gradient: per sample, a cost in the weights' size that the batch does not share.
  double conv_weight_elements = 0;
  // The part of other_flops_* the CPU engine does inside a convolution: a ReLU and a 2x2,
  // stride-2 max pool right after it (launcher/nn/layers/fuse.hpp), on the output while it
  // is in cache, with no pass over memory of their own. A CPU time model leaves them out of
  // its element-wise term; the GPU engine runs every layer, so a GPU model keeps them.
  double cpu_fused_flops_fwd = 0, cpu_fused_flops_bwd = 0;
  // The part of the backward sums above the CPU engine never runs. Both engines skip the
  // input gradient of the spec's first layer; the CPU engine (launcher/nn/layer_stack.cpp)
  // also skips every backward below the lowest layer with parameters, and that layer's
  // input gradient: in an MLP, whose first layer is a flatten, the first dense layer's
  // input-gradient GEMM (a third of its FLOPs) and the backward of a dropout before it.
  // A CPU time model leaves these out; a GPU model keeps them (its stack skips only the
  // first layer's).
  double cpu_skipped_conv_flops_bwd = 0, cpu_skipped_dense_flops_bwd = 0;
  double cpu_skipped_other_flops_bwd = 0, cpu_skipped_workspace_elements = 0;
  // One per layer of the spec's top-level list (a residual block is one entry, its layers
  // nested in it); the sums above count nested layers as if they were top-level.
  std::vector<LayerCost> layers;
  // The CPU engine's memory (TrainingMemoryBytes, MemoryEngine::kCpu). Per sample: the
  // layers' cpu_held_elements plus the input batch three times (the one in use and the
  // loader's two prefetched). Per thread, whatever the batch: every convolution's column
  // tile (two with an input gradient) and, with a ReLU or pool fused into it, one sample's
  // full-size output; each Conv2d keeps its own (launcher/nn/layers/conv2d.cpp).
  double cpu_held_elements = 0;
  double cpu_conv_scratch_elements = 0;

  double param_bytes() const { return 4 * params; }
  double activation_bytes() const { return 4 * activation_elements; }  // per sample
  double flops_fwd() const { return conv_flops_fwd + dense_flops_fwd + other_flops_fwd; }
  double flops_train() const {  // forward + backward, per sample
    return flops_fwd() + conv_flops_bwd + dense_flops_bwd + other_flops_bwd;
  }
};

// Throws SpecError if the spec's shapes do not chain (same checks as LayerShapes).
ModelFeatures ComputeFeatures(const TrainSpec& spec);

// Each top-level layer of the spec on its own, counted as ComputeFeatures counts it inside
// the whole (its fusion with the convolution before it, "first" for layer 0), the input and
// the loss left out: a time model applied to entry i prices layer i, so a pipeline's stages
// can be timed by the model rather than by their FLOPs (estimator/recommend/pipeline_plan.cpp).
std::vector<ModelFeatures> TopLevelLayerFeatures(const TrainSpec& spec);

// Whose memory a figure is. kCpu: the built-in CPU engine (dlh-launch train on a CPU node),
// counted from what that engine allocates and measured by make bench ("A rank's memory").
// kDevice: a GPU's memory under the GPU engine, or a user's program sized by its profile.
enum class MemoryEngine { kCpu, kDevice };

// Memory one rank needs to train with `batch` samples per step, `optimizer_slots` state
// arrays per weight (sgd+momentum 1, adam 2). The process's own share (libraries, MPI, the
// data set in memory) is left out: the figure is the model's. See features.cpp.
double TrainingMemoryBytes(const ModelFeatures& f, int64_t batch, int optimizer_slots,
                           MemoryEngine engine);

// The CPU engine's bytes besides the parameters' copies, for layers whose sums are given
// (a whole network's, or a pipeline stage's): convolutions' partial sums and column tiles,
// and `batch` samples of what the layers keep for backward.
double CpuLayerBytes(double conv_weight_elements, double cpu_scratch_elements,
                     double cpu_held_elements, int64_t batch);

}  // namespace dlh
