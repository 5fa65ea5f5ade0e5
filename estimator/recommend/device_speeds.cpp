// DLH estimator — each GPU type's step speed for the recommender: from its calibration, a
// calibrated type's model scaled by the peaks' ratios, a program's profile, or the roofline.
#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/model/wave_scaling.hpp"
#include "estimator/observe/correction.hpp"
#include "estimator/recommend/profile_speeds.hpp"
#include "estimator/recommend/recommend_detail.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

namespace {

// Roofline assumptions (GPU types without a calibration): a CNN training step reaches
// about 40% of the fp32 peak in its GEMM-bound work and about 60% of the memory bandwidth
// in its element-wise passes; each layer launches kernels costing about 10 us forward and
// 10 us backward; the optimizer reads and writes weights, gradients and state (4 passes
// over the parameters).
constexpr double kComputeEfficiency = 0.4;
constexpr double kBandwidthEfficiency = 0.6;
constexpr double kLaunchSeconds = 10e-6;

// A GPU type's calibration file, loaded and checked; errors name the type.
Calibration LoadTypeCalibration(const GpuType& g) {
  const std::string& path = g.calibration;
  const std::string where = "GPU type \"" + g.name + "\": ";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw EstimateError(where + "calibration file " + path +
                        " not found (calibrate this GPU type, or remove its \"calibration\" "
                        "to use the roofline model)");
  Calibration cal;
  try {
    cal = LoadCalibration(path);
  } catch (const EstimateError& e) {
    throw EstimateError(where + e.what());
  }
  if (cal.model.coef.size() != size_t(kTimeTerms))
    throw EstimateError(where + path + ": model has " + std::to_string(cal.model.coef.size()) +
                        " coefficients, expected " + std::to_string(kTimeTerms));
  return cal;
}

// The time model is affine in the batch: fixed = t(0), per_sample = t(1) - t(0).
DeviceSpeed AffineSpeed(const std::vector<double>& coef, const ModelFeatures& f, bool cpu_engine) {
  const std::vector<double> t0 = TimeTerms(f, 0, cpu_engine), t1 = TimeTerms(f, 1, cpu_engine);
  double at0 = 0, at1 = 0;
  for (int i = 0; i < kTimeTerms; ++i) {
    at0 += coef[size_t(i)] * t0[size_t(i)];
    at1 += coef[size_t(i)] * t1[size_t(i)];
  }
  DeviceSpeed s;
  s.fixed_s = at0;
  s.per_sample_s = at1 - at0;
  return s;
}

}  // namespace

using recommend_detail::Allowed;
using recommend_detail::Printf;

DeviceSpeed RooflineSpeed(const ModelFeatures& f, double layers, const GpuType& g) {
  const double flops = g.peak_tflops * 1e12 * kComputeEfficiency;
  const double bandwidth = g.memory_bandwidth_gbs * 1e9;
  DeviceSpeed s;
  s.per_sample_s = std::max(f.flops_train() / flops,
                            4 * f.activation_elements * 3 / (bandwidth * kBandwidthEfficiency));
  s.fixed_s = 2 * layers * kLaunchSeconds + f.param_bytes() * 4 / bandwidth;
  return s;
}

std::map<std::string, DeviceSpeed> DeviceSpeeds(const Job& job, const Cluster& cluster) {
  std::map<std::string, DeviceSpeed> out;
  std::map<std::string, Calibration> loaded;  // by GPU type: a reference may serve several
  auto calibration_of = [&](const GpuType& g) -> const Calibration& {
    auto it = loaded.find(g.name);
    if (it == loaded.end()) it = loaded.emplace(g.name, LoadTypeCalibration(g)).first;
    return it->second;
  };
  const ModelFeatures& f = job.features;
  const double layers = double(f.layers.empty() ? job.spec.layers.size() : f.layers.size());
  // A profile is this very program measured: it beats any calibration of other models.
  const GpuType* profiled = job.profile ? &ProfiledGpuType(*job.profile, cluster) : nullptr;
  for (const NodeType& n : cluster.node_types) {
    if (out.count(n.gpu) || !Allowed(job, n.gpu)) continue;
    const GpuType* g = cluster.gpu(n.gpu);
    if (!g) throw EstimateError("node type \"" + n.name + "\": unknown GPU type \"" + n.gpu + "\"");
    DeviceSpeed s;
    if (profiled) {
      s = ProfileSpeed(*job.profile, *profiled, *g);
    } else if (!g->calibration.empty()) {
      const Calibration& cal = calibration_of(*g);
      const std::string file = std::filesystem::path(g->calibration).filename().string();
      s = AffineSpeed(cal.model.coef, f, CpuEngineDevice(cal.device));
      s.source = "calibrated (" + file + ")";
      if (const std::string stale = CalibrationStaleness(cal); !stale.empty())
        s.stale = file + ": " + stale;
      if (cal.device == "cpu") s.cpu_threads = CalibrationThreads(cal);
      int measured = 0;
      s.measured_watts = MeasuredWatts(cal, &measured);
      if (s.measured_watts > 0)
        s.energy_source = "measured (" + file + ": " + Printf("%.1f", s.measured_watts) +
                          " W over " + std::to_string(measured) + " samples)";
    } else if (const GpuType* ref = ClosestCalibrated(cluster, *g)) {
      // A measured model moved by the peaks' ratios beats a bare roofline, whose
      // efficiencies are guesses (wave_scaling.hpp).
      const Calibration& cal = calibration_of(*ref);
      const std::string file = std::filesystem::path(ref->calibration).filename().string();
      const SpeedRatio ratio = PeakRatio(*ref, *g);
      s = AffineSpeed(ScaleCoefficients(cal.model.coef, ratio), f, CpuEngineDevice(cal.device));
      s.source = "scaled from " + ref->name + "'s calibration (" + file + "): " + RatioText(ratio);
      s.reference = ref->name;
      // The reference's staleness carries over: the scaled model is no better than it.
      if (const std::string stale = CalibrationStaleness(cal); !stale.empty())
        s.stale = file + ": " + stale;
      if (cal.device == "cpu") s.cpu_threads = CalibrationThreads(cal);
    } else {
      s = RooflineSpeed(f, layers, *g);
      s.source = "roofline (no calibration for " + g->name + " or any other type)";
    }
    // Another type's joules say nothing about this one's power: only its own count.
    if (s.measured_watts <= 0)
      s.energy_source = "datasheet (active_watts " + Printf("%.0f", g->active_watts) + " W)";
    out[g->name] = s;
  }
  // What earlier jobs measured corrects the speeds and says so (estimator/observe/).
  ApplyObservations(job, cluster, &out);
  return out;
}

double MeasuredWatts(const Calibration& cal, int* count) {
  double joules = 0, seconds = 0;
  int n = 0;
  for (const TimingSample& s : cal.samples)
    if (s.joules >= 0 && s.seconds > 0) joules += s.joules, seconds += s.seconds, ++n;
  if (count) *count = n;
  return n > 0 && joules > 0 ? joules / seconds : 0;
}

std::vector<std::string> StaleCalibrationWarnings(
    const std::map<std::string, DeviceSpeed>& speeds) {
  std::vector<std::string> out;
  for (const auto& [gpu, speed] : speeds) {
    if (speed.stale.empty()) continue;
    if (speed.reference.empty())
      out.push_back(gpu + "'s calibration " + speed.stale);
    else
      out.push_back(gpu + "'s speed is scaled from " + speed.reference + "'s calibration " +
                    speed.stale);
  }
  return out;
}

}  // namespace dlh
