// DLH — `dlh-estimate gpu-layers` (see gpu_layers_cmd.hpp).
//
// The samples' layers are rebuilt by their names (estimator/calibrate/gpu_model_layers.hpp).
#include "estimator/cli/gpu_layers_cmd.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/time_steps_file.hpp"
#include "estimator/calibrate/calibrate.hpp"
#include "estimator/calibrate/gpu_model_layers.hpp"
#include "estimator/cli/command_line.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/features.hpp"
#include "estimator/model/gpu_layer_model.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/model/wave_scaling.hpp"

namespace po = boost::program_options;

namespace dlh {
namespace {

using cli::Parse;
using cli::Printf;
using cli::Str;

// A GPU type's published peaks (share/gpu/specs/*.json), with the file's whole text kept
// for the predictions' record.
struct PeaksFile {
  GpuPeaks peaks;
  nlohmann::json json;
};

PeaksFile LoadPeaks(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot read");
  PeaksFile f;
  const std::string what =
      " (a GPU peaks file: name, fp32_tflops, tf32_tflops, bandwidth_gbs, sms)";
  try {
    f.json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    throw UsageError(path + ": not valid JSON" + what);
  }
  if (!f.json.is_object()) throw UsageError(path + ": not a JSON object" + what);
  // Each field named with what is wrong with it, in the words of the other input checks.
  auto field = [&](const char* key, bool text) -> const nlohmann::json& {
    const auto it = f.json.find(key);
    if (it == f.json.end()) throw UsageError(path + ": " + key + ": required" + what);
    if (text ? !it->is_string() : !it->is_number())
      throw UsageError(path + ": " + key + ": must be a " + (text ? "string" : "number") +
                       ", got " + it->dump());
    return *it;
  };
  f.peaks.name = field("name", true).get<std::string>();
  f.peaks.fp32_tflops = field("fp32_tflops", false).get<double>();
  f.peaks.tf32_tflops = field("tf32_tflops", false).get<double>();
  f.peaks.bandwidth_gbs = field("bandwidth_gbs", false).get<double>();
  const double sms = field("sms", false).get<double>();
  if (!(sms >= 1 && sms <= 100000 && sms == std::floor(sms)))
    throw UsageError(path + ": sms: must be a whole number of SMs, got " + f.json["sms"].dump());
  f.peaks.sms = int(sms);
  CheckGpuPeaks(f.peaks, path);
  return f;
}

std::string Today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

GpuType AsGpuType(const GpuPeaks& p) {
  GpuType g;
  g.name = p.name;
  g.peak_tflops = p.fp32_tflops;
  g.memory_bandwidth_gbs = p.bandwidth_gbs;
  return g;
}

nlohmann::json ParamsJson(const GpuLayerFit& fit) {
  nlohmann::json j;
  const std::vector<double> v = GpuLayerParamValues(fit.params);
  for (int i = 0; i < kGpuLayerParams; ++i) j[GpuLayerParamNames()[size_t(i)]] = v[size_t(i)];
  j["overlap"] = fit.params.overlap;
  return j;
}

void PrintFit(const GpuLayerFit& fit, const std::string& path, const GpuPeaks& gpu) {
  // --folds 0: no cross-validation, and no cross-validated figure to print as one.
  const bool cv = fit.folds >= 2;
  char cv_text[64] = " (no cross-validation: --folds 0)", other_cv[48] = "";
  if (cv) {
    std::snprintf(cv_text, sizeof cv_text, ", %d-fold cross-validated MAPE %.1f%%", fit.folds,
                  fit.cv_mape);
    std::snprintf(other_cv, sizeof other_cv, ", cross-validated %.1f%%", fit.other_cv_mape);
  }
  std::printf(
      "layer model fitted to %s (%s: FP32 %g, TF32 %g TFLOP/s, %g GB/s, %d SMs): %d samples, "
      "MAPE %.1f%%%s\n",
      path.c_str(), gpu.name.c_str(), gpu.fp32_tflops, gpu.tf32_tflops, gpu.bandwidth_gbs, gpu.sms,
      fit.samples, fit.mape, cv_text);
  std::printf("  %-22s %s (the other form: MAPE %.1f%%%s)\n", "host and device",
              fit.params.overlap ? "overlapped: max(host, device) + step"
                                 : "in series: host + device + step",
              fit.other_mape, other_cv);
  const std::vector<double> v = GpuLayerParamValues(fit.params);
  for (int i = 0; i < kGpuLayerParams; ++i)
    std::printf("  %-22s %.4g\n", GpuLayerParamNames()[size_t(i)].c_str(), v[size_t(i)]);
}

// --check PREDICTIONS --measured FILE: the committed predictions against the type's
// measurements, model by model, for both models the file holds.
int CheckPredictions(const po::variables_map& vm) {
  if (!vm.count("measured")) throw UsageError("--check: needs --measured");
  const std::string path = Str(vm, "check");
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot read");
  std::map<std::string, std::pair<double, double>> predicted;  // model: layers, wave-scaled
  std::string created, target;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    created = j.at("created").get<std::string>();
    target = j.at("target").at("name").get<std::string>();
    for (const auto& r : j.at("predictions"))
      predicted[r.at("model").get<std::string>()] = {
          r.at("seconds").get<double>(), r.at("wave_scaled_linear_seconds").get<double>()};
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(path + ": not a predictions file (gpu-layers --out): " + e.what());
  }
  const std::string measured_path = Str(vm, "measured");
  const Calibration m = LoadCalibration(measured_path);
  std::printf("predictions for %s made %s (%s) against %s (%s)\n%-30s %6s %11s %10s %8s %16s %8s\n",
              target.c_str(), created.c_str(), path.c_str(), measured_path.c_str(), m.host.c_str(),
              "model", "batch", "measured ms", "layers ms", "error", "wave-scaled ms", "error");
  double sum_layers = 0, sum_scaled = 0;
  int n = 0;
  for (const TimingSample& s : m.samples) {
    auto it = predicted.find(s.model);
    if (it == predicted.end() || !(s.seconds > 0)) continue;
    const double e1 = 100 * (it->second.first - s.seconds) / s.seconds;
    const double e2 = 100 * (it->second.second - s.seconds) / s.seconds;
    sum_layers += std::fabs(e1), sum_scaled += std::fabs(e2), ++n;
    std::printf("%-30s %6lld %11.3f %10.3f %+7.1f%% %16.3f %+7.1f%%\n", s.model.c_str(),
                (long long)s.batch, s.seconds * 1e3, it->second.first * 1e3, e1,
                it->second.second * 1e3, e2);
  }
  if (n == 0) throw UsageError("--check: no model of " + measured_path + " was predicted");
  std::printf("MAPE over %d models: layer model %.1f%%, wave-scaled linear model %.1f%%\n", n,
              sum_layers / n, sum_scaled / n);
  return kExitOk;
}

// The profiled models of FILE with their layers, rebuilt from their names.
std::vector<GpuPassSample> ProfiledSamples(const std::string& path) {
  const TimeStepsResult r = ReadTimeStepsResult(path);
  const std::map<std::string, TrainSpec>& known = KnownGpuModels();
  std::vector<GpuPassSample> out;
  for (const TimeStepsSample& s : r.samples) {
    if (s.layers.empty() || !(s.seconds > 0)) continue;
    auto it = known.find(s.model);
    if (it == known.end())
      throw UsageError(path + ": '" + s.model +
                       "' is no GPU sweep or validation model: its layers cannot be rebuilt");
    GpuPassSample p;
    p.model = s.model;
    p.features = ComputeFeatures(it->second);
    p.batch = s.batch;
    p.step_s = s.seconds;
    p.passes = s.layers;
    p.held = s.layers_held;
    out.push_back(std::move(p));
  }
  return out;
}

void PrintPassFit(const GpuPassFit& fit, const std::string& path) {
  std::printf(
      "layer model fitted to the passes of %s: device terms to %d passes, MAPE %.1f%%; host "
      "terms to %d passes, MAPE %.1f%% (the profile's own marking, %.2f us a pass, left out); "
      "the step to %d whole steps, MAPE %.1f%%\n",
      path.c_str(), fit.device_passes, fit.device_mape, fit.host_passes, fit.host_mape,
      fit.marking_s * 1e6, fit.steps, fit.step_mape);
  std::printf("  %-22s %s (the other form: MAPE %.1f%%)\n", "host and device",
              fit.params.overlap ? "overlapped: max(host, device) + step"
                                 : "in series: host + device + step",
              fit.other_step_mape);
  const std::vector<double> v = GpuLayerParamValues(fit.params);
  for (int i = 0; i < kGpuLayerParams; ++i)
    std::printf("  %-22s %.4g\n", GpuLayerParamNames()[size_t(i)].c_str(), v[size_t(i)]);
}

// --profile FILE (dlh-estimate profile --device cuda --out): the fitted model's device and
// host time of every profiled pass against the measured ones, summed by layer kind and pass.
void CompareProfiles(const std::vector<GpuPassSample>& samples, const std::string& path,
                     const GpuPeaks& gpu, const GpuLayerParams& params, bool each) {
  struct Group {
    int passes = 0;
    double measured_device = 0, predicted_device = 0, device_error = 0;
    double measured_host = 0, predicted_host = 0;
  };
  std::map<std::string, Group> groups;  // "conv2d forward"
  int unmodelled = 0, unheld = 0;
  for (const GpuPassSample& s : samples) {
    std::map<std::pair<int, std::string>, std::pair<double, double>> predicted;  // device, host
    for (const GpuKernel& k : GpuStepKernels(s.features, s.batch)) {
      const std::pair<int, std::string> key{k.layer, GpuProfilePass(k, s.features.layers)};
      if (key.second.empty()) continue;
      predicted[key].first += KernelDeviceSeconds(k, gpu, params);
      predicted[key].second += KernelHostSeconds(k, params);
    }
    unheld += s.held ? 0 : 1;
    if (each)
      std::printf("\n%s, batch %lld\n  %5s %-16s %-16s %12s %12s %10s %10s  %s\n", s.model.c_str(),
                  (long long)s.batch, "layer", "kind", "pass", "device ms", "predicted", "host ms",
                  "predicted", "algorithm");
    for (const LayerPassTime& p : s.passes) {
      const auto found = predicted.find({p.layer, p.pass});
      if (found == predicted.end()) {
        ++unmodelled;
        continue;
      }
      Group& g = groups[p.kind + " " + p.pass];
      ++g.passes;
      g.measured_device += p.device_s;
      g.predicted_device += found->second.first;
      if (p.device_s > 0)
        g.device_error += std::fabs(found->second.first - p.device_s) / p.device_s;
      g.measured_host += p.host_s;
      g.predicted_host += found->second.second;
      if (each)
        std::printf("  %5s %-16s %-16s %12.4f %12.4f %10.4f %10.4f  %s\n",
                    p.layer < 0 ? "-" : std::to_string(p.layer).c_str(), p.kind.c_str(),
                    p.pass.c_str(), p.device_s * 1e3, found->second.first * 1e3, p.host_s * 1e3,
                    found->second.second * 1e3, p.algorithm.empty() ? "-" : p.algorithm.c_str());
    }
  }
  if (samples.empty())
    throw UsageError("--profile: " + path + ": no profiled model (time-steps --profile)");
  std::printf(
      "\nthe layer model's passes against %s (%d models%s; %d passes the model runs no kernel "
      "for left out):\n%-30s %6s %13s %13s %8s %10s %11s %11s\n",
      path.c_str(), int(samples.size()),
      unheld > 0 ? Printf(", %.0f of them not held: their device times hold the host's gaps",
                          double(unheld))
                       .c_str()
                 : "",
      unmodelled, "kind and pass", "passes", "device ms", "predicted", "MAPE", "host ms",
      "predicted", "host ratio");
  for (const auto& [name, g] : groups)
    std::printf("%-30s %6d %13.4f %13.4f %7.1f%% %10.4f %11.4f %11.2f\n", name.c_str(), g.passes,
                g.measured_device * 1e3, g.predicted_device * 1e3, 100 * g.device_error / g.passes,
                g.measured_host * 1e3, g.predicted_host * 1e3,
                g.measured_host > 0 ? g.predicted_host / g.measured_host : 0.0);
}

}  // namespace

int GpuLayersCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate gpu-layers: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("calibration", po::value<std::string>(),
        "GPU calibration whose sweep samples the model is fitted to (required but with --check)")
    ("peaks", po::value<std::string>(),
        "the calibrated GPU's published peaks (share/gpu/specs/*.json; required but with --check)")
    ("check", po::value<std::string>(),
        "instead: how far predictions written before (--out) are from --measured, the "
        "measurements of that type; fits nothing")
    ("measured", po::value<std::string>(),
        "validation measurements (validate --save): the layer model's and the linear model's "
        "errors on them")
    ("set", po::value<std::string>(), "with --measured: only the models of this validation set "
        "(judged, term or all; default: all of the file)")
    ("predict", po::value<std::string>(),
        "another GPU type's peaks: predict the GPU validation models there")
    ("out", po::value<std::string>(), "with --predict: write the predictions here (JSON)")
    ("date", po::value<std::string>(), "with --out: the date to record (default: today, UTC)")
    ("folds", po::value<int>()->default_value(5), "cross-validation folds (0: none)")
    ("markdown", "print the table as Markdown")
    ("sweep", "also print the fit's error on every sweep sample")
    ("profile", po::value<std::string>(), "a per-layer GPU profile (dlh-estimate profile --device "
        "cuda --out) of the calibrated type: the model's time of every pass against it")
    ("passes", "with --profile: every pass of every model, not only the sums by kind")
    ("fit-profile", "with --profile: fit the layer model to the profile's passes (its device "
        "and host terms) and whole steps (the step's synchronisation and form) instead of the "
        "calibration's sweep; what follows uses that fit")
    ("store", "write the fitted model, with --peaks (and with --measured its MAPE there, which "
        "then sets its plans' band), into the --calibration file: the recommender then plans "
        "that type, and the types whose peaks the cluster names, with it");
  // clang-format on
  po::variables_map vm;
  if (!Parse("gpu-layers", args, d, {}, vm)) return kExitOk;
  if (vm.count("check")) return CheckPredictions(vm);
  for (const char* required : {"calibration", "peaks"})
    if (!vm.count(required)) throw UsageError(std::string("--") + required + ": required");
  if (vm.count("out") && !vm.count("predict")) throw UsageError("--out: needs --predict");
  if (vm.count("out")) CheckOutputFolder(Str(vm, "out"), "--out");
  if (vm.count("set") && !vm.count("measured")) throw UsageError("--set: needs --measured");
  if (vm.count("passes") && !vm.count("profile")) throw UsageError("--passes: needs --profile");
  if (vm.count("fit-profile") && !vm.count("profile"))
    throw UsageError("--fit-profile: needs --profile");
  const std::string cal_path = Str(vm, "calibration");
  const Calibration cal = LoadCalibration(cal_path);
  if (cal.device != "cuda")
    throw UsageError("--calibration: " + cal_path + " is a " + cal.device +
                     " calibration; the layer model is for a GPU");
  const PeaksFile reference = LoadPeaks(Str(vm, "peaks"));
  if (!cal.device_info.is_null() && cal.device_info.contains("multiprocessors") &&
      cal.device_info["multiprocessors"].get<int>() != reference.peaks.sms)
    std::fprintf(stderr, "dlh-estimate: warning: %s names %d SMs, the calibration's GPU had %d\n",
                 Str(vm, "peaks").c_str(), reference.peaks.sms,
                 cal.device_info["multiprocessors"].get<int>());
  // Rows refit added from observed jobs keep no layers: the fit here is the sweep's alone
  // (refit itself fits the layer model to them, from their records' specs).
  int observed = 0;
  const std::vector<TimingSample> sweep = GpuSamplesWithLayers(cal.samples, cal_path, &observed);
  if (observed > 0)
    std::printf("%s: %d rows of observed jobs left out (their layers are not kept in the file)\n",
                cal_path.c_str(), observed);
  GpuLayerFit fit = FitGpuLayerModel(sweep, reference.peaks, vm["folds"].as<int>());
  PrintFit(fit, cal_path, reference.peaks);
  StoredGpuLayerModel stored;
  stored.present = true;
  stored.peaks = reference.peaks;
  stored.samples = fit.samples;
  stored.mape = fit.mape;
  stored.cv_mape = fit.cv_mape;
  stored.fitted_to = "the calibration's sweep";
  std::vector<GpuPassSample> profiled;  // --profile's, read once
  if (vm.count("profile")) profiled = ProfiledSamples(Str(vm, "profile"));
  if (vm.count("fit-profile")) {
    const std::string path = Str(vm, "profile");
    const GpuPassFit by_passes = FitGpuLayerModelToPasses(profiled, reference.peaks);
    PrintPassFit(by_passes, path);
    fit.params = by_passes.params;  // what follows (--sweep, --profile, --measured, --predict)
    stored.samples = by_passes.steps;
    stored.mape = by_passes.step_mape;
    stored.cv_mape = 0;
    stored.fitted_to = "the passes and whole steps of " + path;
    std::printf("the sweep's whole steps under the fit to the passes: MAPE %.1f%%\n",
                GpuStepMape(sweep, reference.peaks, fit.params));
  }
  if (vm.count("sweep"))
    for (const TimingSample& m : sweep) {
      const GpuStepTime t = PredictGpuStep(m.features, m.batch, reference.peaks, fit.params);
      std::printf("  %-44s %5lld %9.3f ms %9.3f ms %+7.1f%% host %.3f device %.3f\n",
                  m.model.c_str(), (long long)m.batch, m.seconds * 1e3, t.seconds * 1e3,
                  100 * (t.seconds - m.seconds) / m.seconds, t.host_s * 1e3, t.device_s * 1e3);
    }

  if (vm.count("profile"))
    CompareProfiles(profiled, Str(vm, "profile"), reference.peaks, fit.params,
                    vm.count("passes") > 0);

  if (vm.count("measured")) {
    const std::string path = Str(vm, "measured");
    std::vector<TimingSample> measured = GpuSamplesWithLayers(LoadCalibration(path).samples, path);
    if (vm.count("set")) {
      const std::vector<SweepEntry> set = ValidationSet(Str(vm, "set"), true);
      measured.erase(std::remove_if(measured.begin(), measured.end(),
                                    [&](const TimingSample& m) {
                                      return std::none_of(set.begin(), set.end(),
                                                          [&](const SweepEntry& e) {
                                                            return e.spec.name == m.model;
                                                          });
                                    }),
                     measured.end());
      if (measured.empty())
        throw UsageError("--measured: " + path + ": no model of the " + Str(vm, "set") + " set");
    }
    const bool md = vm.count("markdown") > 0;
    std::printf(
        "%s\n",
        md ? "\n| model | batch | measured ms | layers ms | error | host ms | "
             "device ms | linear ms | error |\n|---|---|---|---|---|---|---|---|---|"
           : Printf("%-30s %6s %11s %10s %8s %8s %9s %10s %8s", "model", "batch", "measured ms",
                    "layers ms", "error", "host ms", "device ms", "linear ms", "error")
                 .c_str());
    double sum_layers = 0, sum_linear = 0;
    for (const TimingSample& m : measured) {
      const GpuStepTime t = PredictGpuStep(m.features, m.batch, reference.peaks, fit.params);
      const double linear = cal.model.seconds(m.features, m.batch);
      const double e1 = 100 * (t.seconds - m.seconds) / m.seconds;
      const double e2 = 100 * (linear - m.seconds) / m.seconds;
      sum_layers += std::fabs(e1);
      sum_linear += std::fabs(e2);
      std::printf(
          "%s\n",
          (md ? Printf("| %s | %lld | %.2f | %.2f | %+.1f%% | %.2f | %.2f | %.2f | %+.1f%% |",
                       m.model.c_str(), (long long)m.batch, m.seconds * 1e3, t.seconds * 1e3, e1,
                       t.host_s * 1e3, t.device_s * 1e3, linear * 1e3, e2)
              : Printf("%-30s %6lld %11.2f %10.2f %+7.1f%% %8.2f %9.2f %10.2f %+7.1f%%",
                       m.model.c_str(), (long long)m.batch, m.seconds * 1e3, t.seconds * 1e3, e1,
                       t.host_s * 1e3, t.device_s * 1e3, linear * 1e3, e2))
              .c_str());
    }
    const double n = double(measured.size());
    std::printf("%slayer model MAPE over %zu models of %s: %.1f%% (linear model: %.1f%%)\n",
                md ? "\n" : "", measured.size(), path.c_str(), sum_layers / n, sum_linear / n);
    stored.validation_mape = sum_layers / n;
    stored.validation_models = int(measured.size());
  }

  if (vm.count("predict")) {
    const std::string target_path = Str(vm, "predict");
    const PeaksFile target = LoadPeaks(target_path);
    const SpeedRatio ratio = PeakRatio(AsGpuType(reference.peaks), AsGpuType(target.peaks));
    TimeModel scaled = cal.model;
    scaled.coef = ScaleCoefficients(cal.model.coef, ratio);
    nlohmann::json rows = nlohmann::json::array();
    std::printf("\npredictions for %s (%s)\n%-30s %6s %10s %9s %9s %16s\n",
                target.peaks.name.c_str(), target_path.c_str(), "model", "batch", "layers ms",
                "host ms", "device ms", "wave-scaled ms");
    for (const SweepEntry& e : GpuValidationModels()) {
      const ModelFeatures f = ComputeFeatures(e.spec);
      const GpuStepTime t = PredictGpuStep(f, e.batch, target.peaks, fit.params);
      const double linear = scaled.seconds(f, e.batch);
      std::printf("%-30s %6lld %10.3f %9.3f %9.3f %16.3f\n", e.spec.name.c_str(),
                  (long long)e.batch, t.seconds * 1e3, t.host_s * 1e3, t.device_s * 1e3,
                  linear * 1e3);
      rows.push_back({{"model", e.spec.name},
                      {"batch", e.batch},
                      {"set", e.spec.origin == "judged validation models" ? "judged" : "term"},
                      {"seconds", t.seconds},
                      {"host_s", t.host_s},
                      {"device_s", t.device_s},
                      {"kernels", t.kernels},
                      {"wave_scaled_linear_seconds", linear}});
    }
    if (vm.count("out")) {
      nlohmann::json j;
      j["created"] = vm.count("date") ? Str(vm, "date") : Today();
      j["what"] =
          "predicted training-step seconds of the GPU validation models on this type, made "
          "before it was measured (dlh-estimate gpu-layers): 'seconds' by the GPU layer model "
          "(estimator/model/gpu_layer_model.hpp) fitted to the reference calibration's sweep "
          "and carried by the target's peaks; 'wave_scaled_linear_seconds' by the reference's "
          "linear time model wave-scaled by FP32 and bandwidth ratios, as recommend does today";
      j["target"] = target.json;
      j["reference"] = {
          {"calibration", cal_path},
          {"layer_model_fitted_to", vm.count("fit-profile")
                                        ? "the passes and whole steps of " + Str(vm, "profile")
                                        : std::string("the calibration's sweep")},
          {"calibration_created", cal.created},
          {"host", cal.host},
          {"peaks", reference.json},
          {"layer_model", ParamsJson(fit)},
          {"fit",
           {{"samples", fit.samples},
            {"mape", fit.mape},
            {"folds", fit.folds},
            {"cv_mape", fit.cv_mape},
            {"other_form_cv_mape", fit.other_cv_mape}}}};
      j["predictions"] = rows;
      WriteFileAtomically(Str(vm, "out"), j.dump(1) + "\n");
      std::printf("wrote %s\n", Str(vm, "out").c_str());
    }
  }
  if (vm.count("store")) {
    Calibration updated = cal;
    stored.params = fit.params;
    updated.gpu_layer_model = stored;
    SaveCalibration(cal_path, updated);
    std::printf("stored the layer model (%s%s) in %s\n", stored.fitted_to.c_str(),
                stored.validation_models > 0
                    ? Printf(", %.1f%% MAPE on %d validation models", stored.validation_mape,
                             stored.validation_models)
                          .c_str()
                    : "",
                cal_path.c_str());
  }
  return kExitOk;
}

}  // namespace dlh
