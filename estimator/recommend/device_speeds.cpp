// DLH estimator — each GPU type's step speed for the recommender: from its calibration, a
// calibrated type's model scaled by the peaks' ratios, a program's profile, or the roofline.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/model/job_time.hpp"
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

// Uncertainties of the speeds not measured on their own type, as standard deviations of
// ln(measured / predicted) (DeviceSpeed::log_sigma):
//  - a calibration wave-scaled to another type by datasheet ratios: the one transfer this
//    project has measured is between thread counts of one CPU with measured peaks
//    (BENCHMARKS.md, "a calibration moved to another device": 14 predictions, 1 -> 2 and
//    2 -> 1 threads, root mean square of ln r 0.19 against about 0.11 for the own
//    calibrations, so about 0.16 added in quadrature). Across GPU types by datasheet peaks
//    it has never been measured (issue 40): 0.25, conservative and unmeasured.
//  - the bare roofline: the same measurements gave it a root mean square of ln r of 0.41
//    with the target's measured peaks (two models off by 2.6x); with datasheet peaks and
//    assumed efficiencies, 0.6, unmeasured.
//  - a profile's own step: its points' min-max spread when recorded, at least
//    kProfileFloorLogSigma (a run's median step against the next run's: assumed, unmeasured).
constexpr double kWaveTransferLogSigma = 0.25;
constexpr double kRooflineLogSigma = 0.6;
constexpr double kProfileFloorLogSigma = 0.05;

double Quadrature(double a, double b) { return std::sqrt(a * a + b * b); }

// The calibration's own spread: its cross-validated sigma, or for a file from before it, the
// cross-validated MAPE as one (mean |ln r| is 0.798 sigma for a normal ln r); plus a
// transfer's added error (Calibration::transfer_log_sigma) in quadrature.
// A MAPE (%) read as a standard deviation of ln(measured / predicted): mean |ln r| is 0.798
// sigma for a normal ln r.
double MapeLogSigma(double mape) { return std::log1p(mape / 100) / 0.7979; }

double CalibrationLogSigma(const Calibration& cal) {
  const FitQuality& q = cal.model.quality;
  const double own = q.cv_log_sigma > 0 ? q.cv_log_sigma : MapeLogSigma(q.cv_mape);
  return Quadrature(own, std::max(0.0, cal.transfer_log_sigma));
}

// A stored GPU layer model's spread: the larger of its cross-validated MAPE (its MAPE on the
// samples where it has none) and its MAPE on validation models outside the sweep.
double LayerModelLogSigma(const StoredGpuLayerModel& m) {
  const double own = m.cv_mape > 0 ? m.cv_mape : m.mape;
  return MapeLogSigma(std::max(own, m.validation_mape));
}

// A profile's spread: the widest of its points' ln(max / min) taken as a 90% two-sided
// range (over 2 x 1.645), at least the floor.
double ProfileLogSigma(const ProgramProfile& p) {
  double sigma = kProfileFloorLogSigma;
  for (const ProfilePoint& pt : p.points)
    if (pt.step_s_min > 0 && pt.step_s_max > pt.step_s_min)
      sigma = std::max(sigma, std::log(pt.step_s_max / pt.step_s_min) / (2 * 1.6449));
  return sigma;
}

// The probe's measurements by thread count (Calibration::probe), when it has them: a JSON
// array of positive numbers, else empty.
std::vector<double> ProbeByThreads(const Calibration& cal, const char* key) {
  std::vector<double> out;
  if (!cal.probe.is_object() || !cal.probe.contains(key)) return out;
  const nlohmann::json& a = cal.probe.at(key);
  if (!a.is_array()) return out;
  for (const nlohmann::json& v : a) {
    if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) return {};
    out.push_back(v.get<double>());
  }
  return out;
}

// The calibration's whole-step thread scaling (Calibration::thread_scaling), threads -> step
// time over the calibration's own count; empty where the file has none, or was made before
// 2026-12-01T06:00Z: until then the fewer threads never reached the engine's pool (a3de41b,
// TimeTrainingStep), and the ratios near 1 that those files hold measured nothing.
std::map<int, double> MeasuredStepRatio(const Calibration& cal) {
  const nlohmann::json& t = cal.thread_scaling;
  if (!t.is_object() || cal.created < "2026-12-01T06:00:00Z") return {};
  std::map<int, double> out;
  // LoadCalibration checked the arrays: as long as each other, positive numbers.
  for (size_t i = 0; i < t.at("threads").size(); ++i)
    out[t.at("threads")[i].get<int>()] = t.at("step_time_ratio")[i].get<double>();
  return out;
}

// How a CPU calibration's per-sample time moves with the threads (job_time.hpp): the whole
// steps it timed at each thread count, the probe's curves, and the share of this model's
// per-sample time in compute terms.
ThreadScaling CpuScaling(const Calibration& cal, const std::vector<double>& coef,
                         const ModelFeatures& f) {
  ThreadScaling t;
  t.gflops = ProbeByThreads(cal, "sgemm_gflops_by_threads");
  // The bandwidth the engine's memory-bound passes get: the cache triad's, sized as a step's
  // activations and columns are (launcher/probe/host_probe.cpp), where the probe has it, as the
  // transfer takes it (calibrate_transfer.cpp); the memory triad's for older probes. Replayed
  // on the 70 whole jobs of seven make bench runs (share/bench/replay_jobs.py, 2026-12-08):
  // MAPE per run 7.7-12.8% (mean 9.9%) with the memory triad, 7.7-11.9% (9.5%) with the
  // cache's; the example CNN's first run as 2 ranks of 1 thread, planned from its run alone
  // at 2 threads, -13.5..+30.9% against -13.5..+9.7% (it ran as fast side by side as alone,
  // where the memory triad's curve split a bandwidth its passes do not wait on).
  t.gbs = ProbeByThreads(cal, "cache_gbs_by_threads");
  if (t.gbs.empty()) t.gbs = ProbeByThreads(cal, "memory_gbs_by_threads");
  t.measured_step_ratio = MeasuredStepRatio(cal);
  const std::vector<double> t0 = TimeTerms(f, 0, true), t1 = TimeTerms(f, 1, true);
  double compute = 0, memory = 0;
  for (int i = 0; i < kTimeTerms && size_t(i) < coef.size(); ++i) {
    const double per = coef[size_t(i)] * (t1[size_t(i)] - t0[size_t(i)]);
    if (TimeTermRate(i) == TermRate::Compute) compute += per;
    if (TimeTermRate(i) == TermRate::Memory) memory += per;
  }
  if (compute + memory > 0) t.compute_fraction = compute / (compute + memory);
  return t;
}

// A GPU type's calibration file, loaded and checked; errors name the type.
Calibration LoadTypeCalibration(const GpuType& g) {
  const std::string& path = g.calibration;
  const std::string where = (g.cpu ? "CPU node type \"" : "GPU type \"") + g.name + "\": ";
  std::error_code ec;
  // A CPU node type's calibration is required (no peaks time it): no roofline to fall back to.
  if (!std::filesystem::exists(path, ec))
    throw EstimateError(where + "calibration file " + path + " not found (" +
                        (g.cpu ? std::string("dlh-estimate calibrate on one of its nodes, and "
                                             "name the file in its \"calibration\"")
                               : std::string("calibrate this GPU type, or remove its "
                                             "\"calibration\" to use the roofline model")) +
                        ")");
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

// Each top-level layer's pass, update and per-sample seconds (DeviceSpeed). The step-time
// model is linear in the features: a layer without its parameters costs its pass (and the
// step's overhead, which is no layer's and stays with the whole), its parameters the update.
// Where the calibration has a layer model (fitted to the sweep's layers timed one by one:
// layer_time_model.hpp), the pass and the per-sample time are the layer model's; the update
// stays the step-time model's (the layer rows leave the optimizer out).
void SplitByLayer(const std::vector<double>& coef, const LayerTimeModel& layer_model,
                  const std::vector<ModelFeatures>& layers, bool cpu_engine, DeviceSpeed* s) {
  const double step_overhead = AffineSpeed(coef, ModelFeatures{}, cpu_engine).fixed_s;
  // The step-time model's layer terms (all but the overhead and the update) are a layer
  // model too: the one to divide by where the calibration has none of its own.
  LayerTimeModel whole;
  whole.coef = coef;
  const LayerTimeModel& divide = layer_model.empty() ? whole : layer_model;
  s->layer_pass_s.clear();
  s->layer_update_s.clear();
  s->layer_per_sample_s.clear();
  for (const ModelFeatures& l : layers) {
    const double update = AffineSpeed(coef, l, cpu_engine).fixed_s - step_overhead -
                          LayerSeconds(whole, l, 0, cpu_engine);
    const double pass = LayerSeconds(divide, l, 0, cpu_engine);
    s->layer_update_s.push_back(std::max(0.0, update));
    s->layer_pass_s.push_back(std::max(0.0, pass));
    s->layer_per_sample_s.push_back(std::max(0.0, LayerSeconds(divide, l, 1, cpu_engine) - pass));
  }
}

// The job's optimizer beyond the sweep's, and stale-synchronous training's own steps
// (optimizer_cost.hpp): fixed costs of every step.
void AddOptimizerUpdate(const Calibration& cal, const Job& job, double bandwidth_ratio,
                        DeviceSpeed* s) {
  s->fixed_s =
      std::max(0.0, s->fixed_s + OptimizerExtraSeconds(cal.optimizer_update, job.spec.optimizer,
                                                       job.features.params, bandwidth_ratio));
  const SyncSpec& sync = job.spec.sync;
  if (!job.profile && sync.stale_sync() && sync.own_gradient_first)
    s->fixed_s += OwnStepsSeconds(cal.optimizer_update, job.spec.optimizer, sync.staleness,
                                  recommend_detail::OptimizerSlots(job), job.features.params,
                                  bandwidth_ratio);
}

// The job's GELUs and SiLUs beyond the step-time model's price of them (activation_cost.hpp):
// a cost per sample. `coef`: the model in use, on a device `flops_ratio` times the
// calibration's arithmetic speed.
void AddActivations(const Calibration& cal, const std::vector<double>& coef, const ModelFeatures& f,
                    double flops_ratio, DeviceSpeed* s) {
  if (cal.activation_cost.empty()) return;
  s->per_sample_s =
      std::max(0.0, s->per_sample_s + CalibratedActivationSeconds(cal, coef, f, 1, flops_ratio));
}

// The layer model moved with the step-time model's coefficients (wave scaling), or none.
LayerTimeModel ScaledLayerModel(const LayerTimeModel& m, const SpeedRatio& ratio) {
  LayerTimeModel out = m;
  if (!m.empty()) out.coef = ScaleCoefficients(m.coef, ratio);
  return out;
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
  std::map<std::string, DeviceSpeed> out = CalibratedDeviceSpeeds(job, cluster);
  // What earlier jobs measured corrects the speeds and says so (estimator/observe/).
  ApplyObservations(job, cluster, &out);
  return out;
}

std::map<std::string, DeviceSpeed> CalibratedDeviceSpeeds(const Job& job, const Cluster& cluster) {
  std::map<std::string, DeviceSpeed> out;
  std::map<std::string, Calibration> loaded;  // by GPU type: a reference may serve several
  auto calibration_of = [&](const GpuType& g) -> const Calibration& {
    auto it = loaded.find(g.name);
    if (it == loaded.end()) it = loaded.emplace(g.name, LoadTypeCalibration(g)).first;
    return it->second;
  };
  const ModelFeatures& f = job.features;
  const double layers = double(f.layers.empty() ? job.spec.layers.size() : f.layers.size());
  // A profile has no spec layers to split by; a job made of features alone (tests) neither.
  std::vector<ModelFeatures> by_layer;
  if (!job.profile && !job.spec.layers.empty() && f.layers.size() == job.spec.layers.size())
    by_layer = TopLevelLayerFeatures(job.spec);
  // A profile is this very program measured: it beats any calibration of other models.
  std::optional<ProfileSources> profiled;
  if (job.profile) profiled = ProfileSourcesOf(job, cluster);
  for (const NodeType& n : cluster.node_types) {
    if (out.count(n.gpu) || !Allowed(job, n.gpu)) continue;
    if (n.cpu && job.profile) continue;  // not planned there (recommender.cpp, UsableTypes)
    const GpuType* g = cluster.gpu(n.gpu);
    if (!g) throw EstimateError("node type \"" + n.name + "\": unknown GPU type \"" + n.gpu + "\"");
    DeviceSpeed s;
    if (profiled) {
      // Its own profile, or the closest measured type's scaled by the peaks, with the
      // uncertainty of a transfer between types.
      auto own = profiled->measured.find(g->name);
      const std::string ref =
          own != profiled->measured.end() ? g->name : profiled->transferred.at(g->name);
      const ProgramProfile& p = *profiled->measured.at(ref);
      s = ProfileSpeed(p, *cluster.gpu(ref), *g);
      s.log_sigma = ProfileLogSigma(p);
      if (g->name != ref) s.log_sigma = Quadrature(s.log_sigma, kWaveTransferLogSigma);
    } else if (!g->calibration.empty()) {
      const Calibration& cal = calibration_of(*g);
      const std::string file = std::filesystem::path(g->calibration).filename().string();
      if (g->cpu && cal.device != "cpu")
        throw EstimateError("CPU node type \"" + g->name + "\": calibration " + g->calibration +
                            " was measured on device " + cal.device +
                            ", not the CPU engine (dlh-estimate calibrate on one such node)");
      s = AffineSpeed(cal.model.coef, f, CpuEngineDevice(cal.device));
      AddOptimizerUpdate(cal, job, 1, &s);
      AddActivations(cal, cal.model.coef, f, 1, &s);
      SplitByLayer(cal.model.coef, cal.layer_model, by_layer, CpuEngineDevice(cal.device), &s);
      s.source = "calibrated (" + file + ")";
      if (const std::string stale = CalibrationStaleness(cal); !stale.empty())
        s.stale = file + ": " + stale;
      if (cal.device == "cpu") {
        s.cpu_threads = CalibrationThreads(cal);
        s.cpu_scaling = CpuScaling(cal, cal.model.coef, f);
      }
      s.log_sigma = CalibrationLogSigma(cal);
      // A GPU calibration's own layer model, on the GPU it was fitted on.
      if (cal.gpu_layer_model.present &&
          recommend_detail::LayerModelSpeed(job, cal.gpu_layer_model.peaks,
                                            cal.gpu_layer_model.params, &s)) {
        AddOptimizerUpdate(cal, job, 1, &s);  // what the job's optimizer adds, as above
        s.source = "GPU layer model of " + file;
        s.provenance = "calibration " + g->name + " (" + file + ", its GPU layer model)";
        s.log_sigma = Quadrature(LayerModelLogSigma(cal.gpu_layer_model),
                                 std::max(0.0, cal.transfer_log_sigma));
      }
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
      const std::vector<double> coef = ScaleCoefficients(cal.model.coef, ratio);
      s = AffineSpeed(coef, f, CpuEngineDevice(cal.device));
      AddOptimizerUpdate(cal, job, ratio.bandwidth, &s);
      AddActivations(cal, coef, f, ratio.flops, &s);
      SplitByLayer(coef, ScaledLayerModel(cal.layer_model, ratio), by_layer,
                   CpuEngineDevice(cal.device), &s);
      s.source = "scaled from " + ref->name + "'s calibration (" + file + "): " + RatioText(ratio);
      s.reference = ref->name;
      // The reference's staleness carries over: the scaled model is no better than it.
      if (const std::string stale = CalibrationStaleness(cal); !stale.empty())
        s.stale = file + ": " + stale;
      if (cal.device == "cpu") {
        s.cpu_threads = CalibrationThreads(cal);
        s.cpu_scaling = CpuScaling(cal, coef, f);
      }
      s.log_sigma = Quadrature(CalibrationLogSigma(cal), kWaveTransferLogSigma);
      // The reference's layer model, carried by this type's own peaks where the cluster names
      // them all (each kernel's roofline and waves on its SMs; efficiencies and host times
      // kept): per operation, not one ratio for the whole step.
      const GpuPeaks peaks{g->name, g->peak_tflops, g->tf32_tflops, g->memory_bandwidth_gbs,
                           g->sms};
      if (cal.gpu_layer_model.present && g->tf32_tflops > 0 && g->sms > 0 &&
          recommend_detail::LayerModelSpeed(job, peaks, cal.gpu_layer_model.params, &s)) {
        AddOptimizerUpdate(cal, job, ratio.bandwidth, &s);
        s.source = "GPU layer model of " + ref->name + "'s calibration (" + file +
                   "), carried by " + g->name + "'s peaks (FP32 " + Printf("%g", g->peak_tflops) +
                   ", TF32 " + Printf("%g", g->tf32_tflops) + " TFLOP/s, " +
                   Printf("%g", g->memory_bandwidth_gbs) + " GB/s, " + std::to_string(g->sms) +
                   " SMs)";
        s.log_sigma = Quadrature(LayerModelLogSigma(cal.gpu_layer_model), kWaveTransferLogSigma);
      }
    } else {
      s = RooflineSpeed(f, layers, *g);
      s.source = "roofline (no calibration for " + g->name + " or any other type)";
      s.log_sigma = kRooflineLogSigma;
    }
    // Another type's joules say nothing about this one's power: only its own count.
    if (s.measured_watts <= 0)
      s.energy_source = "datasheet (active_watts " + Printf("%.0f", g->active_watts) + " W)";
    out[g->name] = s;
  }
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
