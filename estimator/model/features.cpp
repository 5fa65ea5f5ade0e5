// DLH estimator — per-sample costs of a training spec, counted the way the CPU engine
// (launcher/nn/layers/) executes each layer.
//
// FLOPs per sample, one multiply-add = 2 (X = K*K*C*F*Ho*Wo multiply-adds of a conv2d,
// "first" = the layer at index 0, whose input gradient the engine never computes; the CPU
// engine computes none below its lowest layer with parameters either, which the
// cpu_skipped_* fields take off for a CPU model: features.hpp):
//
//   layer            forward               backward
//   conv2d           2X + F*Ho*Wo (bias)   2X + F*Ho*Wo (weight and bias gradients, one
//                                          GEMM over the im2col columns and row sums)
//                                          + 2X (input gradient: W^T GEMM), except first
//   dense            2*in*out + out        2*in*out + out (weight, bias) + 2*in*out
//                                          (input), the last except first
//   maxpool2d        K*K*out (comparisons) out (scatter of the winners), 0 if first
//   avgpool2d        K*K*out (window sums) K*K*out (each output's gradient / K*K added to
//                                          its window), 0 if first
//   globalavgpool2d  in (channel sums)     in (each channel's gradient / H*W, spread), 0 if
//                                          first
//   relu             in                    in, 0 if first
//   gelu             10*in                 12*in, 0 if first
//   silu             5*in                  6*in, 0 if first
//   batchnorm        8*in                  8*in, 3*in if first (parameter gradients only)
//   dropout          in                    in, 0 if first
//   flatten          0                     0
//   residual         its paths + out       its paths + in (the sum of the two paths' input
//                    (the addition)        gradients; the identity's is the output
//                                          gradient itself), 0 for the sum if first
//   loss             3*classes             2*classes       (softmax cross-entropy; other_flops)
//
// Batchnorm, counted from launcher/nn/layers/batchnorm.cpp's training path: forward sums for
// the mean (1), squared deviations (3), normalise (2) and scale-shift (2) = 8 per element;
// backward accumulates dbeta (1) and dgamma (2), then the input gradient
// k * (a*g - sum_g - xhat*sum_gx) (5) = 8 per element. The loss splits its ~5 FLOPs per
// class as max + exp + sum forward, softmax - one-hot and scale backward (label smoothing
// adds a per-class constant to the one-hot, no work worth counting).
//
// The activations with a transcendental function count it as a few FLOPs, as a vectorised
// libm spends them (a convention: their real cost is in the time model's element-wise rate,
// which calibration fits). Exact GELU, x * Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2:
// erf about 6, the scale, add, halve and multiply 4 = 10; backward g * (Phi(x) + x * phi(x))
// needs erf again and exp(-x^2/2) for phi, about 12. SiLU, x * sigmoid(x): negate, exp, add
// one, divide, multiply = 5; backward g * s * (1 + x * (1 - s)) with s recomputed from the
// input or kept: 6.
//
// A residual block runs its main path and its shortcut as stacks of their own (with the same
// fusion inside each as at the top level), so each nested layer is counted by the rows above
// and adds to the sums of ModelFeatures exactly as a top-level layer would: conv2d and dense
// to the GEMM sums, the rest to other_flops, every nested output to the activations, plus
// the block's sum. A nested layer is "first" only when the block is the spec's first layer
// and it is its path's first; the block's own row in ModelFeatures::layers sums its paths.
//
// Col2im's accumulation and the layout copies are memory traffic, not FLOPs; the time
// model's element-wise term (activations) absorbs them.
//
// Parameters: conv2d F*C*K*K + F, dense in*out + out, batchnorm 2*C (gamma, beta; for a
// flat input C is its feature count), a residual block its paths'. Activations: the input
// plus every layer's output, nested ones included.

#include "estimator/model/features.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.hpp"

namespace dlh {

namespace {

// Which layers of one list (the spec's, or a residual path's) the CPU engine runs inside the
// convolution before them: the rule of launcher/nn/layers/fuse.cpp (FuseFollowers), on the
// spec alone, since the estimator (and the SPANK plugin with it) does not build layers.
// tests/unit/fuse_test.cpp checks they agree.
std::vector<bool> CpuFusedLayers(const std::vector<LayerSpec>& l) {
  std::vector<bool> fused(l.size(), false);
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i].kind != LayerKind::Conv2d) continue;
    size_t next = i + 1;
    if (next < l.size() && l[next].kind == LayerKind::Relu) fused[next++] = true;
    if (next < l.size() && l[next].kind == LayerKind::MaxPool2d && l[next].kernel == 2 &&
        l[next].stride == 2 && l[next].padding == 0)
      fused[next] = true;
  }
  return fused;
}

// One thread's im2col tile of a convolution on the CPU engine: rows of the output taken
// together so that the columns stay within 256 kB, at least one row. The rule of
// launcher/nn/layers/conv_tiles.hpp (ConvTileRows), restated here because the estimator
// does not build layers; tests/unit/features_test.cpp checks they agree.
double CpuColumnTile(const LayerSpec& l, const Shape3& in, const Shape3& out) {
  const double ckk = double(in.channels) * l.kernel * l.kernel;
  const double row_bytes = std::max(1.0, ckk) * std::max(1, out.width) * 4;
  const double rows =
      std::clamp(std::floor(256.0 * 1024 / row_bytes), 1.0, double(std::max(1, out.height)));
  return ckk * rows * out.width;
}

// Per sample, what a layer keeps for its backward besides its output and input gradient
// (launcher/nn/layers): batchnorm its normalised input, dropout its mask, a max pool the
// index of each window's winner (also when it runs inside the convolution before it).
double CpuScratch(const LayerSpec& l, const LayerCost& c) {
  switch (l.kind) {
    case LayerKind::BatchNorm:
    case LayerKind::Dropout:
      return double(c.in.elements());
    case LayerKind::MaxPool2d:
      return double(c.out.elements());
    default:
      return 0;
  }
}

// Which layers compute no input gradient. kFirstOnly: the first layer of the network (the
// GPU engine's stack, and the sums of ModelFeatures). kBelowParameters: also every layer
// below the lowest one with parameters, and that one's (the CPU engine's LayerStack).
enum class FirstRule { kFirstOnly, kBelowParameters };

void AddPath(const std::vector<LayerSpec>& layers, const std::vector<Shape3>& shapes,
             bool path_first, FirstRule rule, const std::string& origin, const std::string& path,
             ModelFeatures* f, std::vector<LayerCost>* out);

// One layer's cost; adds it (a residual block: its nested layers) to the sums of `f`.
// `first`: the engine computes no input gradient for it. `at` names it ("layers[3]").
LayerCost AddLayer(const LayerSpec& l, const Shape3& in_shape, const Shape3& out_shape, bool first,
                   FirstRule rule, bool cpu_fused, const std::string& origin, const std::string& at,
                   ModelFeatures* f) {
  LayerCost c;
  c.kind = l.kind;
  c.in = in_shape;
  c.out = out_shape;
  const double in = double(c.in.elements());
  const double out = double(c.out.elements());
  c.out_elements = out;
  double other_fwd = 0, other_bwd = 0;  // this layer's part of other_flops
  switch (l.kind) {
    case LayerKind::Conv2d: {
      const double k2 = double(l.kernel) * l.kernel;
      const double plane = double(c.out.height) * c.out.width;  // Ho*Wo
      const double macs = k2 * c.in.channels * l.filters * plane;
      c.flops_fwd = 2 * macs + out;                           // GEMM + bias
      c.flops_bwd = 2 * macs + out + (first ? 0 : 2 * macs);  // dW, db, dX
      c.params = double(l.filters) * c.in.channels * k2 + l.filters;
      // im2col columns (C*K*K) x (Ho*Wo) per sample, and their gradient before col2im.
      c.workspace_elements = k2 * c.in.channels * plane * (first ? 1 : 2);
      f->conv_flops_fwd += c.flops_fwd;
      f->conv_flops_bwd += c.flops_bwd;
      f->conv_layers += 1;
      f->total_filters += l.filters;
      f->conv_workspace_elements += c.workspace_elements;
      f->conv_output_elements += out;
      c.conv_weight_elements = double(l.filters) * c.in.channels * k2;
      c.cpu_scratch_elements = CpuColumnTile(l, c.in, c.out) * (first ? 1 : 2);
      f->conv_weight_elements += c.conv_weight_elements;
      f->cpu_conv_scratch_elements += c.cpu_scratch_elements;
      break;
    }
    case LayerKind::Dense: {
      const double macs = in * l.units;
      c.flops_fwd = 2 * macs + l.units;
      c.flops_bwd = 2 * macs + l.units + (first ? 0 : 2 * macs);
      c.params = macs + l.units;
      f->dense_flops_fwd += c.flops_fwd;
      f->dense_flops_bwd += c.flops_bwd;
      f->dense_layers += 1;
      f->dense_nodes += l.units;
      break;
    }
    case LayerKind::MaxPool2d:
      other_fwd = double(l.kernel) * l.kernel * out;
      other_bwd = first ? 0 : out;
      break;
    case LayerKind::AvgPool2d:
      other_fwd = double(l.kernel) * l.kernel * out;
      other_bwd = first ? 0 : double(l.kernel) * l.kernel * out;
      break;
    case LayerKind::GlobalAvgPool2d:
    case LayerKind::Relu:
    case LayerKind::Dropout:
      other_fwd = in;
      other_bwd = first ? 0 : in;
      break;
    case LayerKind::Gelu:
      other_fwd = 10 * in;
      other_bwd = first ? 0 : 12 * in;
      break;
    case LayerKind::Silu:
      other_fwd = 5 * in;
      other_bwd = first ? 0 : 6 * in;
      break;
    case LayerKind::BatchNorm:
      other_fwd = 8 * in;
      other_bwd = (first ? 3 : 8) * in;
      c.params = 2.0 * c.in.channels;
      break;
    case LayerKind::Flatten:
      break;
    case LayerKind::Residual: {
      // Both paths from the block's input; the shapes were checked with the spec's
      // (LayerShapes), so PathShapes cannot throw here.
      AddPath(l.layers, PathShapes(l.layers, c.in, origin, at + ".layers"), first, rule, origin,
              at + ".layers", f, &c.layers);
      if (!l.shortcut.empty())
        AddPath(l.shortcut, PathShapes(l.shortcut, c.in, origin, at + ".shortcut"), first, rule,
                origin, at + ".shortcut", f, &c.shortcut);
      for (const std::vector<LayerCost>* p : {&c.layers, &c.shortcut})
        for (const LayerCost& n : *p) {
          c.flops_fwd += n.flops_fwd;
          c.flops_bwd += n.flops_bwd;
          c.params += n.params;
          c.workspace_elements += n.workspace_elements;
          c.cpu_held_elements += n.cpu_held_elements;
          c.cpu_scratch_elements += n.cpu_scratch_elements;
          c.conv_weight_elements += n.conv_weight_elements;
        }
      // (The paths' layers added theirs to f.) The shortcut's input gradient, added to the
      // main path's afterwards.
      if (!l.shortcut.empty() && !first) {
        c.cpu_held_elements += in;
        f->cpu_held_elements += in;
      }
      // The addition of the two outputs; backward, the sum of the two input gradients.
      other_fwd = out;
      other_bwd = first ? 0 : in;
      break;
    }
  }
  c.flops_fwd += other_fwd;
  c.flops_bwd += other_bwd;
  f->other_flops_fwd += other_fwd;
  f->other_flops_bwd += other_bwd;
  const double held = CpuScratch(l, c) + (first || cpu_fused ? 0 : in);
  c.cpu_held_elements += held;
  f->cpu_held_elements += held;
  c.cpu_fused = cpu_fused;
  if (c.cpu_fused) {
    f->cpu_fused_flops_fwd += c.flops_fwd;
    f->cpu_fused_flops_bwd += c.flops_bwd;
  }
  // A residual's nested parameters were added with its layers; its output is the sum.
  if (l.kind != LayerKind::Residual) f->params += c.params;
  f->activation_elements += out;
  return c;
}

// The layers of one list, `shapes` its shapes (size + 1), appended to `out`. `path_first`:
// the list starts the network (the spec's own, or a path of a first residual block).
void AddPath(const std::vector<LayerSpec>& layers, const std::vector<Shape3>& shapes,
             bool path_first, FirstRule rule, const std::string& origin, const std::string& path,
             ModelFeatures* f, std::vector<LayerCost>* out) {
  const std::vector<bool> cpu_fused = CpuFusedLayers(layers);
  bool params_below = false;
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool first = path_first && (rule == FirstRule::kFirstOnly ? i == 0 : !params_below);
    out->push_back(AddLayer(layers[i], shapes[i], shapes[i + 1], first, rule, cpu_fused[i], origin,
                            path + "[" + std::to_string(i) + "]", f));
    LayerCost& c = out->back();
    params_below = params_below || c.params > 0;
    // The CPU engine keeps a layer's output unless the next runs inside it (then the last
    // of the fused run's output stands for them all); a convolution with a fused ReLU or
    // pool computes each sample's full-size output in its thread's scratch.
    const bool next_fused = i + 1 < layers.size() && cpu_fused[i + 1];
    const double held_output = next_fused ? 0 : c.out_elements;
    c.cpu_held_elements += held_output;
    f->cpu_held_elements += held_output;
    if (c.kind == LayerKind::Conv2d && next_fused) {
      c.cpu_scratch_elements += c.out_elements;
      f->cpu_conv_scratch_elements += c.out_elements;
    }
  }
}

// What `all` counts (kFirstOnly) and the CPU engine does not run (`as_cpu_runs`, the same
// layers counted kBelowParameters), into all's cpu_skipped_* fields.
void SetCpuSkipped(const ModelFeatures& as_cpu_runs, ModelFeatures* all) {
  all->cpu_skipped_conv_flops_bwd = std::max(0.0, all->conv_flops_bwd - as_cpu_runs.conv_flops_bwd);
  all->cpu_skipped_dense_flops_bwd =
      std::max(0.0, all->dense_flops_bwd - as_cpu_runs.dense_flops_bwd);
  all->cpu_skipped_other_flops_bwd =
      std::max(0.0, all->other_flops_bwd - as_cpu_runs.other_flops_bwd);
  all->cpu_skipped_workspace_elements =
      std::max(0.0, all->conv_workspace_elements - as_cpu_runs.conv_workspace_elements);
}

// The CPU engine's held elements are those of the layers counted by its rule (which of them
// compute an input gradient); `to` (counted kFirstOnly) takes them over, nested ones too.
void CopyCpuHeld(const std::vector<LayerCost>& from, std::vector<LayerCost>* to) {
  for (size_t i = 0; i < from.size() && i < to->size(); ++i) {
    (*to)[i].cpu_held_elements = from[i].cpu_held_elements;
    (*to)[i].cpu_scratch_elements = from[i].cpu_scratch_elements;
    CopyCpuHeld(from[i].layers, &(*to)[i].layers);
    CopyCpuHeld(from[i].shortcut, &(*to)[i].shortcut);
  }
}

}  // namespace

ModelFeatures ComputeFeatures(const TrainSpec& spec) {
  const std::vector<Shape3> shapes = LayerShapes(spec);  // throws SpecError
  ModelFeatures f;
  f.input_elements = spec.input.elements();
  f.activation_elements = double(f.input_elements);
  AddPath(spec.layers, shapes, true, FirstRule::kFirstOnly, spec.origin, "layers", &f, &f.layers);
  ModelFeatures as_cpu_runs;
  std::vector<LayerCost> unused;
  AddPath(spec.layers, shapes, true, FirstRule::kBelowParameters, spec.origin, "layers",
          &as_cpu_runs, &unused);
  SetCpuSkipped(as_cpu_runs, &f);
  CopyCpuHeld(unused, &f.layers);
  f.cpu_held_elements = as_cpu_runs.cpu_held_elements + 3.0 * double(f.input_elements);
  f.cpu_conv_scratch_elements = as_cpu_runs.cpu_conv_scratch_elements;
  // Softmax cross-entropy over the logits.
  f.other_flops_fwd += 3.0 * spec.classes;
  f.other_flops_bwd += 2.0 * spec.classes;
  return f;
}

std::vector<ModelFeatures> TopLevelLayerFeatures(const TrainSpec& spec) {
  const std::vector<Shape3> shapes = LayerShapes(spec);  // throws SpecError
  const std::vector<bool> cpu_fused = CpuFusedLayers(spec.layers);
  std::vector<ModelFeatures> out(spec.layers.size());
  bool params_below = false;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const std::string at = "layers[" + std::to_string(i) + "]";
    out[i].layers.push_back(AddLayer(spec.layers[i], shapes[i], shapes[i + 1], i == 0,
                                     FirstRule::kFirstOnly, cpu_fused[i], spec.origin, at,
                                     &out[i]));
    ModelFeatures as_cpu_runs;
    AddLayer(spec.layers[i], shapes[i], shapes[i + 1], !params_below, FirstRule::kBelowParameters,
             cpu_fused[i], spec.origin, at, &as_cpu_runs);
    SetCpuSkipped(as_cpu_runs, &out[i]);
    params_below = params_below || out[i].layers.back().params > 0;
  }
  return out;
}

// Bytes one rank holds while training with `batch` samples per step (4-byte floats, P the
// parameters, s the optimizer slots, b the batch).
//
// kCpu, the CPU engine, as make bench's memory part measured it (BENCHMARKS.md, "A rank's
// memory"; heaptrack showed where each part lives):
//   4 P (3 + 2 s)            weights, gradients and optimizer state (2 + s); the checkpoint
//                            writer's snapshot of weights and state, kept between checkpoints
//                            for reuse (1 + s; the writer frees it before the end exports the
//                            weights once more to check that the ranks agree)
//   + 4 min(b, 8) conv_weight_elements     each convolution's weight-gradient partial sums
//                            (kGradChunks in conv2d.cpp), members of the layer
//   + 4 cpu_conv_scratch_elements          one thread's column tiles, every convolution's
//   + 4 b cpu_held_elements                what the layers keep from forward to backward
// Columns are a tile per thread, not the whole batch's, and a fused ReLU or pool holds no
// output of its own; counting them as the GPU figure does over-predicted CNNs 3-10 times.
// Each further thread of the rank adds one more set of column tiles.
//
// kDevice, a GPU (or a program's profile, which sets activation_elements from its measured
// peak: profile_speeds.cpp):
//   4 P (2 + s)                            weights, gradients, optimizer state
//   + 4 b activation_elements 2            forward activations (the input included), and
//                                          as much again for what backward needs
//   + 4 b conv_workspace_elements          im2col columns (and their gradients)
// The "as much again" covers the gradient buffers and the per-layer scratch kept for
// backward, each about one activation of its layer; on the whole it is an upper bound. It
// has not been measured on a GPU.
double TrainingMemoryBytes(const ModelFeatures& f, int64_t batch, int optimizer_slots,
                           MemoryEngine engine) {
  if (batch < 0)
    throw EstimateError("training memory: batch must be non-negative, got " +
                        std::to_string(batch));
  if (optimizer_slots < 0)
    throw EstimateError("training memory: optimizer slots must be non-negative, got " +
                        std::to_string(optimizer_slots));
  const double b = double(batch), s = double(optimizer_slots);
  if (engine == MemoryEngine::kCpu)
    return 4.0 * f.params * (3.0 + 2.0 * s) + CpuLayerBytes(f.conv_weight_elements,
                                                            f.cpu_conv_scratch_elements,
                                                            f.cpu_held_elements, batch);
  return 4.0 * f.params * (2.0 + s) + 4.0 * b * f.activation_elements * 2.0 +
         4.0 * b * f.conv_workspace_elements;
}

double CpuLayerBytes(double conv_weight_elements, double cpu_scratch_elements,
                     double cpu_held_elements, int64_t batch) {
  return 4.0 * double(std::min<int64_t>(batch, 8)) * conv_weight_elements +
         4.0 * cpu_scratch_elements + 4.0 * double(batch) * cpu_held_elements;
}

}  // namespace dlh
