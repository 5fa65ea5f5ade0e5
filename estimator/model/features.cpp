// DLH estimator — per-sample costs of a training spec, counted the way the CPU engine
// (launcher/nn/layers/) executes each layer.
//
// FLOPs per sample, one multiply-add = 2 (X = K*K*C*F*Ho*Wo multiply-adds of a conv2d,
// "first" = the layer at index 0, whose input gradient the engine never computes):
//
//   layer      forward               backward
//   conv2d     2X + F*Ho*Wo (bias)   2X + F*Ho*Wo (weight and bias gradients, one GEMM
//                                    over the im2col columns and row sums)
//                                    + 2X (input gradient: W^T GEMM), except first
//   dense      2*in*out + out        2*in*out + out (weight, bias) + 2*in*out (input),
//                                    the last except first
//   maxpool2d  K*K*out (comparisons) out (scatter of the winners), 0 if first
//   relu       in                    in, 0 if first
//   batchnorm  8*in                  8*in, 3*in if first (parameter gradients only)
//   dropout    in                    in, 0 if first
//   flatten    0                     0
//   loss       3*classes             2*classes       (softmax cross-entropy; other_flops)
//
// Batchnorm, counted from launcher/nn/layers/batchnorm.cpp's training path: forward sums for
// the mean (1), squared deviations (3), normalise (2) and scale-shift (2) = 8 per element;
// backward accumulates dbeta (1) and dgamma (2), then the input gradient
// k * (a*g - sum_g - xhat*sum_gx) (5) = 8 per element. The loss splits its ~5 FLOPs per
// class as max + exp + sum forward, softmax - one-hot and scale backward.
//
// Col2im's accumulation and the layout copies are memory traffic, not FLOPs; the time
// model's element-wise term (activations) absorbs them.
//
// Parameters: conv2d F*C*K*K + F, dense in*out + out, batchnorm 2*C (gamma, beta; for a
// flat input C is its feature count). Activations: the input plus every layer's output.

#include "estimator/model/features.hpp"

#include <string>

#include "common/error.hpp"

namespace dlh {

namespace {

// Which layers the CPU engine runs inside the convolution before them: the rule of
// launcher/nn/layers/fuse.cpp (FuseFollowers), on the spec alone, since the estimator (and the
// SPANK plugin with it) does not build layers. tests/unit/fuse_test.cpp checks they agree.
std::vector<bool> CpuFusedLayers(const TrainSpec& spec) {
  const std::vector<LayerSpec>& l = spec.layers;
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

}  // namespace

ModelFeatures ComputeFeatures(const TrainSpec& spec) {
  const std::vector<Shape3> shapes = LayerShapes(spec);  // throws SpecError
  const std::vector<bool> cpu_fused = CpuFusedLayers(spec);
  ModelFeatures f;
  f.input_elements = spec.input.elements();
  f.activation_elements = double(f.input_elements);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const bool first = i == 0;
    LayerCost c;
    c.kind = l.kind;
    c.in = shapes[i];
    c.out = shapes[i + 1];
    const double in = double(c.in.elements());
    const double out = double(c.out.elements());
    c.out_elements = out;
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
        f.conv_flops_fwd += c.flops_fwd;
        f.conv_flops_bwd += c.flops_bwd;
        f.conv_layers += 1;
        f.total_filters += l.filters;
        f.conv_workspace_elements += c.workspace_elements;
        f.conv_output_elements += out;
        break;
      }
      case LayerKind::Dense: {
        const double macs = in * l.units;
        c.flops_fwd = 2 * macs + l.units;
        c.flops_bwd = 2 * macs + l.units + (first ? 0 : 2 * macs);
        c.params = macs + l.units;
        f.dense_flops_fwd += c.flops_fwd;
        f.dense_flops_bwd += c.flops_bwd;
        f.dense_layers += 1;
        f.dense_nodes += l.units;
        break;
      }
      case LayerKind::MaxPool2d:
        c.flops_fwd = double(l.kernel) * l.kernel * out;
        c.flops_bwd = first ? 0 : out;
        break;
      case LayerKind::Relu:
      case LayerKind::Dropout:
        c.flops_fwd = in;
        c.flops_bwd = first ? 0 : in;
        break;
      case LayerKind::BatchNorm:
        c.flops_fwd = 8 * in;
        c.flops_bwd = (first ? 3 : 8) * in;
        c.params = 2.0 * c.in.channels;
        break;
      case LayerKind::Flatten:
        break;
    }
    if (l.kind != LayerKind::Conv2d && l.kind != LayerKind::Dense) {
      f.other_flops_fwd += c.flops_fwd;
      f.other_flops_bwd += c.flops_bwd;
    }
    c.cpu_fused = cpu_fused[i];
    if (c.cpu_fused) {
      f.cpu_fused_flops_fwd += c.flops_fwd;
      f.cpu_fused_flops_bwd += c.flops_bwd;
    }
    f.params += c.params;
    f.activation_elements += out;
    f.layers.push_back(c);
  }
  // Softmax cross-entropy over the logits.
  f.other_flops_fwd += 3.0 * spec.classes;
  f.other_flops_bwd += 2.0 * spec.classes;
  return f;
}

// Bytes one rank holds while training with `batch` samples per step (4-byte floats):
//
//   4 * params * (2 + optimizer_slots)           weights, gradients, optimizer state
//   + 4 * batch * activation_elements * 2        forward activations (the input included),
//                                                and as much again for what backward needs
//   + 4 * batch * conv_workspace_elements        im2col columns (and their gradients)
//
// The "as much again" covers the engine's two ping-pong gradient buffers (each as large
// as the largest activation) and the per-layer scratch kept for backward (batchnorm's
// normalised input, dropout masks, maxpool winners, conv2d output columns), each about one
// activation of its layer; on the whole it is an upper bound. The conv workspace is a SUM
// over layers, not the largest one, because every Conv2d keeps its own column buffers as
// members (launcher/nn/layers/layers.hpp) so that steady-state training does not allocate.
double TrainingMemoryBytes(const ModelFeatures& f, int64_t batch, int optimizer_slots) {
  if (batch < 0)
    throw EstimateError("training memory: batch must be non-negative, got " +
                        std::to_string(batch));
  if (optimizer_slots < 0)
    throw EstimateError("training memory: optimizer slots must be non-negative, got " +
                        std::to_string(optimizer_slots));
  const double b = double(batch);
  return 4.0 * f.params * (2.0 + optimizer_slots) + 4.0 * b * f.activation_elements * 2.0 +
         4.0 * b * f.conv_workspace_elements;
}

}  // namespace dlh
