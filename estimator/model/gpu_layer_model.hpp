// DLH estimator — the GPU step time from its layers (issue 40, part 5).
//
// The linear time model (time_model.hpp) sums CPU-shaped terms; on a GPU its convolution
// rate fits to 0 and its per-layer constants carry the time. This model follows what the
// CUDA engine (launcher/engine/cuda/) runs instead: every layer and pass is a list of
// kernels, each with a device time from its roofline and a host time to issue it.
//
//   kernel device time = max(compute, memory, floor)
//     compute: a GEMM (convolution as implicit GEMM, TF32 tensor cores as cuDNN rates fp32
//              convolutions on Ampere and newer; dense layers in plain FP32, the engine's
//              CUBLAS_COMPUTE_32F) cut into output tiles of 32-128 a side as a library's
//              heuristic would (the least padded work, a smaller tile counted at its
//              lower rate); tiles run in waves of one per SM, the last wave padded (wave
//              quantisation), each tile at efficiency x peak / SMs. A GEMM with fewer
//              tiles than SMs and a long inner dimension is split along it (split-K), as
//              cuDNN and cuBLAS do for weight gradients.
//     memory:  bytes moved / (efficiency x bandwidth); a cuDNN convolution has its own
//              efficiency, lower below 128 filters (on the H100 sweep this one term took
//              the cross-validated error from 20.9% to 9.9%: NCHW convolutions of few
//              channels move their bytes far slower than element-wise kernels do)
//     floor:   a kernel's least time on the device (launch latency, its one short wave)
//   kernel host time = per kernel, more for a cuDNN convolution call (its descriptors and
//                      heuristics: the H100's linear fit put 0.27 ms on each conv layer)
//   step = the kernels in order, each starting when the host has issued it and the one
//          before it has finished (so max(host, device) where either dominates), plus a
//          fixed per-step synchronisation (the host waits for backward, reads the loss);
//          or, where that predicts the calibration's sweep worse, host + device + the
//          synchronisation (on the H100 sweep it does, which says the host times fitted
//          are spent while the device waits, not hidden behind it: `dlh-estimate
//          gpu-layers` prints both forms' cross-validated MAPE).
//
// Passes per layer: forward, backward-data (not for the first layer: the engine skips its
// input gradient), backward-weights (bias included), and the optimizer's update (one
// kernel over the flat parameter array). A type without a calibration is predicted by the
// same parameters with its own peaks (FP32, TF32, bandwidth, SM count): the efficiencies
// and the host times stay, which assumes the same host and a similar memory system.
// References: Habitat (Yu et al., ATC '21) for wave scaling; NeuSight (ASPLOS '25) for
// predicting a kernel's tiles and bounding them by the roofline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/layer_pass_time.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/gpu_layer_params.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

enum class GpuPass { Forward, BackwardData, BackwardWeights, Update };
const char* GpuPassName(GpuPass pass);

// One kernel (or library call) of a step. gemm: m x n output, inner dimension k; flops
// counts 2 per multiply-add.
struct GpuKernel {
  int layer = -1;  // index in the spec's layers; -1: the loss or the update
  GpuPass pass = GpuPass::Forward;
  std::string what;  // "conv fwd", "relu bwd", "sgd update", ...
  bool gemm = false;
  bool tensor = false;  // TF32 tensor cores (convolutions); else plain FP32
  double m = 0, n = 0, k = 0;
  double flops = 0;
  double bytes = 0;
  bool conv_call = false;  // a cuDNN convolution call (more host time)
  double channels = 0;     // a convolution's filters (its output's channels)
};

// The kernels of one training step with `batch` samples, in the order the engine issues
// them (forward, loss, backward from the last layer, update). `features` must hold its
// layers (ComputeFeatures); momentum: the update keeps a momentum buffer.
std::vector<GpuKernel> GpuStepKernels(const ModelFeatures& features, int64_t batch,
                                      bool momentum = true);

// A GEMM's output tiles on a device of `sms` SMs, as a library's heuristic would cut them:
// the tiling (sides 32, 64 or 128) and split of k (into parts of at least 128) with the least
// padded work per SM, a smaller tile's work counted at its lower rate (sqrt of its arithmetic
// intensity relative to 128 x 128), waves = ceil(tiles * split / sms).
struct GemmTiling {
  double tile_m = 0, tile_n = 0;
  int64_t tiles = 0;
  int64_t split = 1;
  int64_t waves = 0;
};
GemmTiling TileGemm(double m, double n, double k, int sms);

// The compute time of a GEMM at `flops_per_s` (efficiency x peak): waves x the time one SM
// takes for one tile (at the tile's rate). Throws EstimateError for sms < 1 or a non-positive rate.
double GemmComputeSeconds(double m, double n, double k, int sms, double flops_per_s);

// One kernel's device time: max(compute, memory, floor).
double KernelDeviceSeconds(const GpuKernel& k, const GpuPeaks& gpu, const GpuLayerParams& p);
// The same with the GEMM's time at 1 FLOP/s already known (GemmComputeSeconds(m, n, k, sms,
// 1), which the rate only divides): a fit evaluates the kernels many times.
double KernelDeviceSeconds(const GpuKernel& k, const GpuPeaks& gpu, const GpuLayerParams& p,
                           double gemm_seconds_at_unit_rate);
double KernelHostSeconds(const GpuKernel& k, const GpuLayerParams& p);

struct GpuStepTime {
  double seconds = 0;   // the predicted step
  double host_s = 0;    // all kernels' host time
  double device_s = 0;  // all kernels' device time
  int kernels = 0;
};
GpuStepTime PredictGpuStep(const std::vector<GpuKernel>& kernels, const GpuPeaks& gpu,
                           const GpuLayerParams& p);
GpuStepTime PredictGpuStep(const ModelFeatures& features, int64_t batch, const GpuPeaks& gpu,
                           const GpuLayerParams& p);

// The model's MAPE (%) over `samples` (each with its layers) on `gpu`; 0 for none.
double GpuStepMape(const std::vector<TimingSample>& samples, const GpuPeaks& gpu,
                   const GpuLayerParams& p);

struct GpuLayerFit {
  GpuLayerParams params;
  int samples = 0;
  double mape = 0;  // on the samples fitted, %
  int folds = 0;
  double cv_mape = 0;  // k-fold cross-validated, %
  // The same two figures of the step's other form (GpuLayerParams::overlap), not kept.
  double other_mape = 0, other_cv_mape = 0;
};

// Fits the parameters to `samples` (each with its layers in features) measured on `gpu`:
// least squares of ln(predicted / measured), by Nelder-Mead over the parameters' logarithms
// from fixed starts (deterministic), once overlapped and once in series (GpuLayerParams::
// overlap), keeping the form with the lower cross-validated MAPE (with folds >= 2: samples
// dealt to folds in a fixed shuffle), else the lower MAPE on the samples. Throws EstimateError for
// fewer than 2 x 7 samples, a sample without layers, or a GPU without positive peaks.
GpuLayerFit FitGpuLayerModel(const std::vector<TimingSample>& samples, const GpuPeaks& gpu,
                             int folds = 5);

// ---- per-layer profiles (dlh-estimate profile --device cuda; common/layer_pass_time.hpp)

// The profiled pass a kernel runs in, as the CUDA engine marks them (launcher/engine/cuda/
// step_timer.hpp): "forward"; "backward-weights" and "backward-data" of a convolution or
// dense layer, "backward" of any other; "loss"; "update". Empty for a kernel outside every
// profiled pass (a batchnorm's commit). `layers`: the model's (ModelFeatures::layers).
std::string GpuProfilePass(const GpuKernel& k, const std::vector<LayerCost>& layers);

// A model's step as a profile measured it: the whole step, and its passes.
struct GpuPassSample {
  std::string model;
  ModelFeatures features;  // with its layers
  int64_t batch = 0;
  double step_s = 0;  // the whole step, timed apart from the profiled steps
  std::vector<LayerPassTime> passes;
  bool held = true;  // false: its device times hold the host's gaps (time_steps_file.hpp)
};

struct GpuPassFit {
  GpuLayerParams params;
  int device_passes = 0;  // passes the device terms were fitted to
  double device_mape = 0;
  int host_passes = 0;
  double host_mape = 0;
  double marking_s = 0;  // per pass: the profile's own cost (its event, its clock), left out
  int steps = 0;
  double step_mape = 0, other_step_mape = 0;  // whole steps; the other form's
};

// Fits the layer model to profiled passes, each part to what measures it:
//   - the device terms (the four efficiencies, the narrow exponent, a kernel's floor) by least
//     squares of ln(predicted / measured) over the device times of the passes the model runs
//     kernels in, measured at 2 us or more (an event's resolution is about 0.5 us), of the
//     samples whose steps were held until issued;
//   - the host terms (per kernel, per cuDNN convolution call) by non-negative least squares
//     over every pass's host time, with a constant per pass for the profile's own marking,
//     which the step does not pay and the model leaves out;
//   - the step's synchronisation and form (overlapped or in series) to the whole steps.
// Throws EstimateError with fewer than 2 samples or 20 fitted passes, or a sample without
// layers.
GpuPassFit FitGpuLayerModelToPasses(const std::vector<GpuPassSample>& samples, const GpuPeaks& gpu);

// Throws EstimateError (naming `origin` and the field) unless every peak is positive.
void CheckGpuPeaks(const GpuPeaks& gpu, const std::string& origin);

}  // namespace dlh
