// DLH estimator — the regression model of training-step time, its fit, and calibration
// files.
//
// Model (per device type): seconds per step for a local batch b
//   t(b) = c0                                  fixed per-step overhead (launches, loop)
//        + c1 * b * (conv FLOPs fwd+bwd)       GEMM-bound convolution work
//        + c2 * b * (dense FLOPs fwd+bwd)      GEMM-bound dense work
//        + c3 * b * element-wise FLOPs         memory-bound passes (relu, pool, batchnorm,
//                                              dropout, loss), counted per layer kind by the
//                                              operations it does per element: a batchnorm
//                                              costs several times a relu of the same size
//        + c4 * parameters                     optimizer update and gradient copies
//        + c5 * b * im2col elements            convolution columns written and read back
//                                              (forward im2col, backward col2im)
//        + c6 * b * conv output elements       GEMM result tiles: a GEMM's time is about
//                                              FLOPs/peak + k0 * FLOPs/inner, and
//                                              FLOPs/inner = 2 * output elements, so short
//                                              inner dimensions (first layers) cost extra
//        + c7 * conv layers                    fixed cost of a convolution layer per step
//        + c8 * dense layers                   and of a dense layer (its kernel launches,
//                                              library calls and their synchronisation,
//                                              with the element-wise layers around it):
//                                              on a GPU, small models are made of these (the
//                                              H100 fit: 0.33 ms per convolution layer,
//                                              0.02 ms per dense layer)
//        + c9 * b * conv layers                the CPU engine convolves one sample at a
//        + c10 * b * conv weights              time: each sample's GEMM calls cost a fixed
//                                              time per layer, and each reads the layer's
//                                              weights and adds into their gradient (why
//                                              and what they mend: docs/reference/
//                                              dlh-estimate.md). 0 on a GPU, whose engine
//                                              convolves the batch at once.
// Each term is a kind of work a device does at its own rate, so every coefficient is a
// time per unit (seconds per FLOP, per value) and must come out positive; a blind
// polynomial would fit the sweep and fail on new shapes. The fit minimises RELATIVE error
// (each row weighted by 1/t), because a 10 ms error matters on a 20 ms step, not on 2 s.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/model/activation_cost.hpp"
#include "estimator/model/engine_fingerprint.hpp"  // CpuEngineDevice
#include "estimator/model/features.hpp"
#include "estimator/model/gpu_layer_params.hpp"
#include "estimator/model/layer_time_model.hpp"
#include "estimator/model/optimizer_cost.hpp"

namespace dlh {

constexpr int kTimeTerms = 11;
const std::vector<std::string>& TimeTermNames();  // "overhead_s", "conv_s_per_flop", ...
constexpr int kElementwiseTerm = 3;               // "elementwise_s_per_flop"
// Calibration files written before the per-layer terms name the first 7 terms only, and
// those written before the per-sample convolution terms (2026-12-05) the first 9; they load
// with the missing coefficients 0, which is the model they were fitted as.
constexpr int kLegacyTimeTerms = 7;
constexpr int kPerLayerTimeTerms = 9;
// The terms only the CPU engine has (c9 and c10): 0 in every row of a GPU's sweep, and then
// 0 in its fit rather than a rank-deficient design.
constexpr int kFirstCpuOnlyTerm = 9;

// The row of the design matrix for a model and local batch.
// cpu_engine (CpuEngineDevice of the model's device): the element-wise term leaves out the
// layers the CPU engine runs inside a convolution (features.hpp).
std::vector<double> TimeTerms(const ModelFeatures& f, int64_t batch, bool cpu_engine);

// One measured configuration of the calibration sweep.
struct TimingSample {
  std::string model;  // name of the sweep model
  ModelFeatures features;
  int64_t batch = 0;   // local batch of one rank
  double seconds = 0;  // median seconds per training step
  double joules = -1;  // energy per step (-1: not measured)
};

struct FitQuality {
  int samples = 0;
  int folds = 0;
  double r2 = 0;       // on the training data (of t, not of t weighted)
  double mape = 0;     // mean absolute percentage error on the training data, in %
  double cv_mape = 0;  // k-fold cross-validated MAPE, in %
  // The spread of the cross-validated errors as a standard deviation of ln(measured /
  // predicted), estimated robustly (issue 40: prediction bands). 0: not recorded (older
  // files), and the band then falls back to cv_mape.
  double cv_log_sigma = 0;
};

struct TimeModel {
  std::string device;        // "cpu", "cuda:0 (NVIDIA H100 80GB HBM3)", ...
  std::vector<double> coef;  // kTimeTerms coefficients
  FitQuality quality;
  double seconds(const ModelFeatures& f, int64_t batch) const;  // predicted step time
};

// Weighted least squares with k-fold cross-validation (folds >= 2, samples shuffled with a
// fixed seed). Throws EstimateError when samples < 2 * kTimeTerms ("too few samples to fit
// 7 terms: got 9, need at least 14") or the design is rank-deficient.
TimeModel FitTimeModel(const std::string& device, const std::vector<TimingSample>& samples,
                       int folds = 5);

// Calibration file (JSON, docs/reference/calibration-file.md): device, host description, threads,
// creation time, every sample (model name, batch, features summary, seconds, joules), and
// the fitted model with its quality.
struct Calibration {
  std::string device;
  std::string host;  // CPU model / GPU name, cores
  int threads = 0;
  std::string created;  // ISO 8601 UTC
  // What was timed (optional in the file; "" when absent): the engine's fingerprint
  // (engine_fingerprint.hpp), the compiler and the BLAS library.
  std::string engine;
  std::string compiler;
  std::string blas;
  // Each timed file's hash when it was made ("launcher/nn/tensor.cpp" -> 12 hex digits, and
  // "build-flags"; engine_fingerprint.hpp's EngineSources); empty: older files, judged by
  // the fingerprint alone.
  EngineSourceHashes engine_sources;
  // calibrate --device cuda: the GPU and its libraries as dlh_cuda_describe gives them
  // (name, PCI bus id, memory, clocks, driver, CUDA, cuDNN, cuBLAS, NCCL); null: none.
  nlohmann::json device_info;
  // The device probe taken when the calibration was made (launcher/probe/: sgemm at the
  // engine's shapes, memory bandwidth, and on a GPU a convolution, a GEMM and the clocks);
  // null: none (older files). check-calibration compares it with the host's own probe.
  nlohmann::json probe;
  // A CPU calibration's measured thread scaling of whole training steps, one process at a
  // time: {"threads": [1, 2], "step_time_ratio": [1.9, 1], "models": 10}, the median over some
  // sweep models of the step time at each thread count over that at the calibration's, each
  // pair timed side by side. null: not measured (older files, GPUs). Ranks with fewer threads
  // are planned by it (ThreadScaling::measured_step_ratio, job_time.hpp). Files made before
  // 2026-12-01 hold ratios near 1: the fewer threads never reached the engine's pool then
  // (TimeTrainingStep), those ratios measured nothing, and the plan leaves them out.
  nlohmann::json thread_scaling;
  // A CPU calibration's optimizer updates timed apart (optimizer_cost.hpp): what a job's
  // optimizer adds to a step over the sweep's. Empty in older files and GPU calibrations.
  OptimizerUpdateCost optimizer_update;
  // A CPU calibration's GELU and SiLU timed apart (activation_cost.hpp): what they add to a
  // step beyond the model's price of their FLOPs. Empty in older files and GPU calibrations.
  ActivationCost activation_cost;
  // Set when the calibration was carried to another machine by the probes' measured ratios
  // rather than measured there: the calibration it came from ("cpu.json, AMD EPYC, 2
  // cores") and the added uncertainty of the transfer, as a standard deviation of
  // ln(measured / predicted). "" and 0: measured on the machine it describes.
  std::string transferred_from;
  double transfer_log_sigma = 0;
  std::vector<TimingSample> samples;
  TimeModel model;
  // The layer model, fitted to the sweep's layers timed one by one (layer_time_model.hpp:
  // how a step divides among its layers). Its rows are not kept: ten times the whole steps'
  // size in the file, which the plugin reads at every sbatch. Empty in older files and GPU
  // calibrations: the recommender then divides a step by the step-time model.
  LayerTimeModel layer_model;
  // A GPU calibration's layer model (gpu_layer_params.hpp), stored by `dlh-estimate
  // gpu-layers --store`; absent in CPU calibrations and older files.
  StoredGpuLayerModel gpu_layer_model;
};
// The features of what the CPU engine never runs (features.hpp, cpu_skipped_*) as calibration
// files and records name them: optional when read (0 when absent), and left out of a model's
// key in the observation store (estimator/observe/model_key.hpp).
struct FeatureField {
  const char* name;
  double ModelFeatures::*value;
};
extern const std::array<FeatureField, 4> kCpuSkippedFeatures;

nlohmann::json CalibrationToJson(const Calibration& c);
// Throws EstimateError naming the file and field.
Calibration CalibrationFromJson(const nlohmann::json& j, const std::string& origin);
// A sample's "features" object read as a calibration file's are (every field present,
// finite and not negative); throws EstimateError "<origin>: <path>.<field>: ...".
ModelFeatures FeaturesFromJson(const nlohmann::json& j, const std::string& origin,
                               const std::string& path);
Calibration LoadCalibration(const std::string& path);
// Written atomically (common/atomic_file.hpp); throws EstimateError
// "<path>: cannot write: <reason>".
void SaveCalibration(const std::string& path, const Calibration& c);

// Why `c` may not describe this build's engine for its device: "" when its fingerprint
// matches, else one phrase ("measured with engine 1a2b3c4d5e6f, this build's engine is
// 0f9e8d7c6b5a: recalibrate (dlh-estimate calibrate)", or "records no engine ...").
std::string CalibrationStaleness(const Calibration& c);

// The threads a CPU calibration timed with: its "threads", or when that is 0 (all cores)
// the cores its host description names ("AMD EPYC 7B13, 2 cores"); 1 when neither says.
int CalibrationThreads(const Calibration& c);

// A step of `batch` samples' GELUs and SiLUs beyond the step-time model's price of them, on
// the device `c` describes (activation_cost.hpp; 0 where `c` did not time them); the second
// form under the model `coef` scaled from c's to a device `flops_ratio` times its FLOP/s.
double CalibratedActivationSeconds(const Calibration& c, const ModelFeatures& f, int64_t batch);
double CalibratedActivationSeconds(const Calibration& c, const std::vector<double>& coef,
                                   const ModelFeatures& f, double batch, double flops_ratio);

}  // namespace dlh
