// DLH estimator — `dlh-estimate profile SPEC`: where one CPU training step goes, layer by
// layer, against this machine's roofline.
//
// A step's time is split into each layer's forward and backward, the loss and the optimizer
// update (the launcher's step without its data loader and MPI, like the calibration's step
// timer). Each layer is set against two measured ceilings:
//   - the roofline: its FLOPs at this machine's sgemm rate, or the bytes of its tensors at
//     the memory-copy rate, whichever takes longer (dlh-estimate rates);
//   - for convolution and dense layers, their GEMMs alone: OpenBLAS timed on the very
//     products the engine runs for the layer (per sample for a convolution, per batch for a
//     dense layer), on one thread, divided by the thread count; for a convolution also its
//     column copies alone (im2col, col2im: launcher/nn/layers/columns.hpp), timed the same
//     way. What a layer takes beyond those is the engine's own work (bias, gradient sums,
//     fused ReLU and pool) and the cost of running them together.
// So the output says which layers are bound by what, and how far the whole step is from the
// best this machine and its OpenBLAS allow.
#pragma once

#include <string>
#include <vector>

#include "common/spec.hpp"
#include "estimator/model/layer_time_model.hpp"

namespace dlh {

struct LayerProfile {
  int index = 0;
  LayerKind kind = LayerKind::Relu;
  Shape3 out;                    // per sample
  double forward_s = 0;          // median over the timed steps
  double backward_s = 0;         // 0 where the engine skips it (nothing before has params)
  double flops = 0;              // forward + backward, whole batch
  double bytes = 0;              // tensors read or written once each, whole batch
  double roofline_s = 0;         // max(flops / sgemm, bytes / copy)
  double gemm_alone_s = 0;       // conv2d and dense: their GEMMs alone (see above); else 0
  double gemm_alone_gflops = 0;  // the rate OpenBLAS reached on those products, all threads
  double columns_s = 0;          // conv2d: its im2col and col2im copies alone (see above)
  int fused_into = -1;  // >= 0: runs inside that layer (launcher/nn/layers/fuse.hpp): all 0
  bool gemm_layer() const { return kind == LayerKind::Conv2d || kind == LayerKind::Dense; }
};

struct StepProfile {
  std::string model;
  int batch = 0;
  int threads = 0;
  std::string blas_core;  // OpenBLAS's kernel set ("Haswell", "Cooperlake")
  int steps = 0, warmup = 0;
  double step_s = 0;  // median whole step
  double loss_s = 0, update_s = 0;
  double sgemm_gflops = 0, copy_gbs = 0;  // this machine at `threads` (MeasureRates)
  std::vector<LayerProfile> layers;
};

struct ProfileOptions {
  int batch = 0;    // 0: the spec's
  int threads = 1;  // engine threads (and the rates' threads)
  int steps = 20;   // timed steps
  int warmup = 3;
  int rate_blocks = 5;  // MeasureRates blocks
  // Only each layer's forward and backward (the calibration's layer rows): no machine rates,
  // no GEMMs or column copies timed alone, so roofline_s and the *_alone_* fields stay 0.
  bool layers_only = false;
};

// The step this engine design could reach with this OpenBLAS: every GEMM layer at its GEMMs
// and column copies alone, every other layer as measured or at its roofline where that is
// faster, the loss and the update as measured. A lower bound for this im2col + OpenBLAS
// engine on this machine.
double FloorSeconds(const StepProfile& profile);

// Throws UsageError for options out of range, SpecError for a bad spec.
StepProfile ProfileStep(const TrainSpec& spec, const ProfileOptions& options);

// The layer rows of one model for the layer model (layer_time_model.hpp): ProfileStep with
// layers_only at `batch`, one sample per top-level layer that runs on its own (forward +
// backward seconds, TopLevelLayerFeatures' features).
std::vector<LayerTimingSample> LayerTimingSamples(const TrainSpec& spec, int batch, int threads,
                                                  int steps, int warmup);

// `dlh-estimate profile SPEC [--batch B] [--threads N] [--steps S] [--warmup W] [--json]`.
int ProfileCommand(const std::vector<std::string>& args);

}  // namespace dlh
