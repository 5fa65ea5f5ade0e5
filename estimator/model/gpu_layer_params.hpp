// DLH estimator — the GPU layer model's parameters and a GPU type's peaks
// (gpu_layer_model.hpp), apart so that a calibration file can hold a fitted model
// (time_model.hpp, Calibration::gpu_layer_model) without the model's code.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// A GPU type's published peaks (dense, no sparsity).
struct GpuPeaks {
  std::string name;
  double fp32_tflops = 0;  // plain FP32 (CUDA cores)
  double tf32_tflops = 0;  // TF32 tensor cores, dense
  double bandwidth_gbs = 0;
  int sms = 0;
};

// The fitted parameters. Efficiencies are fractions of the peaks; times in seconds.
struct GpuLayerParams {
  double tf32_efficiency = 0.3;
  double fp32_efficiency = 0.6;
  double memory_efficiency = 0.7;       // element-wise kernels, GEMMs of dense layers
  double conv_memory_efficiency = 0.5;  // cuDNN convolutions of 128 filters or more
  // Below 128 filters a convolution's memory efficiency falls as (filters / 128)^this.
  double narrow_exponent = 0.5;
  double host_kernel_s = 5e-6;     // host time to issue one kernel or library call
  double host_conv_call_s = 2e-5;  // extra host time of a cuDNN convolution call
  double kernel_floor_s = 3e-6;    // a kernel's least device time
  double step_s = 5e-5;            // per step: synchronisation, loss read-back
  // How host and device combine: true, the kernels in order, each starting when the host
  // has issued it and the device is free (max(host, device) where either dominates); false,
  // in series (host + device: the host's cost of a library call is spent while the
  // device waits for it). The fit tries both and keeps the better (see FitGpuLayerModel).
  bool overlap = true;
};
constexpr int kGpuLayerParams = 9;
const std::vector<std::string>& GpuLayerParamNames();
std::vector<double> GpuLayerParamValues(const GpuLayerParams& p);
GpuLayerParams GpuLayerParamsFrom(const std::vector<double>& values);

// A layer model fitted to a GPU calibration's sweep (or a per-layer profile) and kept in the
// calibration file (`dlh-estimate gpu-layers --store`), with the peaks of the GPU it was
// fitted on: the recommender plans that type, and carries it to types whose peaks the
// cluster names, with it (estimator/recommend/device_speeds.cpp).
struct StoredGpuLayerModel {
  bool present = false;  // false: none (CPU calibrations, older files)
  GpuLayerParams params;
  GpuPeaks peaks;
  int samples = 0;
  double mape = 0, cv_mape = 0;  // % on the samples fitted; cross-validated (0: not)
  std::string fitted_to;         // "the calibration's sweep", "the passes of FILE"
  // Its MAPE on validation models outside what it was fitted to (gpu-layers --store
  // --measured), % and how many; 0: not validated. Plans' bands take the larger of this and
  // cv_mape: a user's model is outside the sweep too.
  double validation_mape = 0;
  int validation_models = 0;
};

}  // namespace dlh
