// DLH estimator — calibration files: reading, checking and writing them (the model they
// hold is fitted in time_model.cpp).
//
// Calibration file format (format_version 1), one JSON object; every field is required and
// unknown fields are rejected:
//
//   {
//     "format_version": 1,
//     "device": "cpu",                         non-empty string
//     "host": "Intel(R) Xeon(R) ..., 2 cores", string
//     "threads": 2,                            non-negative integer (0: unknown)
//     "created": "2026-11-21T12:00:00Z",       string, ISO 8601 UTC
//     "engine": {"fingerprint": "d42dc4ae35ac", optional: what was timed (12 hex digits,
//                "compiler": "gcc 12.2.0",      engine_fingerprint.hpp), strings; and
//                "blas": "OpenBLAS 0.3.21 ...", optionally each timed file's hash
//                "sources": {"launcher/nn/tensor.cpp": "0f3a...", ..., "build-flags": "..."}},
//     "probe": {"kind": "cpu", ...},           optional: the device probe taken when the
//                                              calibration was made (an object; its fields
//                                              are launcher/probe/probe_record.hpp's, checked
//                                              where it is compared)
//     "thread_scaling": {"threads": [1, 2],   optional (CPU): the step time at each thread
//        "step_time_ratio": [1.4, 1],         count over the calibration's, measured (an
//        "models": 10},                       object; positive ratios, one per count)
//     "optimizer_update": {"params": 1049610, optional (CPU): one update of each optimizer
//        "seconds_per_param": {"sgd": 5e-11, kind timed on that many parameters, seconds
//        "momentum": 9e-11, "adam": 4e-10}},  per parameter (positive numbers;
//                                              optimizer_cost.hpp)
//     "activation_cost": {"values": 65536,    optional (CPU): the engine's GELU and SiLU
//        "seconds_per_value": {                layers timed on that many values, seconds
//        "gelu_forward": 3e-9, ...}},          per value of each pass (positive numbers:
//                                              gelu_ and silu_ forward and backward;
//                                              activation_cost.hpp)
//     "transferred_from": "cpu.json, AMD ...", optional pair: the calibration this one was
//     "transfer_log_sigma": 0.08,              carried from by the probes' ratios (string),
//                                              and the added uncertainty (non-negative
//                                              number, a standard deviation of ln(t))
//     "samples": [                             array (may be empty)
//       {"model": "base",                      string, the sweep model's name
//        "batch": 64,                          positive integer, one rank's batch
//        "seconds": 0.0123,                    positive number, median per step
//        "joules": null,                       null (not measured) or non-negative number
//        "features": {                         per sample, see estimator/model/features.hpp
//          "conv_flops_fwd": 7714560, "conv_flops_bwd": 14939904,
//          "dense_flops_fwd": 805514, "dense_flops_bwd": 1610890,
//          "other_flops_fwd": 379742, "other_flops_bwd": 351508,
//          "activation_elements": 129754, "params": 421834,
//          "conv_workspace_elements": 119952,  non-negative numbers
//          "cpu_fused_flops_fwd": 125440,      optional pair, non-negative numbers
//          "cpu_fused_flops_bwd": 50176,       (0 when absent: older files)
//          "cpu_skipped_dense_flops_bwd": 0,   optional, non-negative numbers, 0 when
//          ..._conv_flops_bwd, ..._other_flops_bwd, absent; also
//          "cpu_skipped_workspace_elements"    (features.hpp)
//          "conv_layers": 2, "total_filters": 96, "dense_layers": 2, "dense_nodes": 138,
//          "input_elements": 784}}             non-negative integers
//     ],
//     "layer_model": {"coef": [0, 2e-11, ...], optional (CPU): the layer model
//        "samples": 660, "step_error": 1.4},   (layer_time_model.hpp), one non-negative
//                                              number per term of "model" (overhead and
//                                              update 0) and 2 more (its element-wise
//                                              layers and values; older files: none), the
//                                              layers it was fitted to and its fit
//     "gpu_layer_model": {                     optional (GPU): the layer model fitted to
//       "params": {"tf32_efficiency": 0.57,    the sweep (gpu_layer_model.hpp), stored by
//         ..., "step_s": 0.00016},             gpu-layers --store: every parameter, > 0
//       "overlap": false,                      (efficiencies at most 1); the step's form;
//       "peaks": {"name": "h100", "fp32_tflops": 66.9, "tf32_tflops": 494.7,
//         "bandwidth_gbs": 3350, "sms": 132},  the GPU's it was fitted on, > 0;
//       "samples": 96, "mape": 8.9, "cv_mape": 9.9,
//       "fitted_to": "the calibration's sweep",  what it was fitted to, and its MAPE on
//       "validation_mape": 19.4,               validation models outside it (0: none)
//       "validation_models": 10}
//     "model": {
//       "terms": ["overhead_s", "conv_s_per_flop", "dense_s_per_flop",
//                 "elementwise_s_per_flop", "update_s_per_param", "im2col_s_per_value",
//                 "conv_out_s_per_value", "conv_layer_s", "dense_layer_s"],
//                                              exactly these (TimeTermNames), or the first
//                                              7 (a file from before the per-layer terms)
//       "coef": [1e-3, 2e-11, ...],            one non-negative number per term
//       "quality": {"samples": 60, "folds": 5,  non-negative integers
//                   "r2": 0.998,                number
//                   "mape": 3.1, "cv_mape": 4.2,  non-negative numbers, in %
//                   "cv_log_sigma": 0.06}}      optional, non-negative (0 when absent:
//                                               older files): FitQuality::cv_log_sigma
//   }
//
// The model's device is the file's "device"; a CPU device's element-wise term leaves out the
// layers its engine runs inside a convolution (CpuEngineDevice). Features read back have no
// per-layer costs
// (`layers` is empty). Errors name the origin and the field:
//   cal.json: samples[3].seconds: must be a positive number, got -1

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

using nlohmann::json;

// ---------------------------------------------------------------- calibration files

const std::array<FeatureField, 4> kCpuSkippedFeatures{
    {{"cpu_skipped_conv_flops_bwd", &ModelFeatures::cpu_skipped_conv_flops_bwd},
     {"cpu_skipped_dense_flops_bwd", &ModelFeatures::cpu_skipped_dense_flops_bwd},
     {"cpu_skipped_other_flops_bwd", &ModelFeatures::cpu_skipped_other_flops_bwd},
     {"cpu_skipped_workspace_elements", &ModelFeatures::cpu_skipped_workspace_elements}}};

namespace {

// Integral values of a double are written as JSON integers (7714560, not 7714560.0).
json NumberJson(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9007199254740992.0)
    return json(int64_t(v));
  return json(v);
}

json FeaturesJson(const ModelFeatures& f) {
  json j{{"conv_flops_fwd", NumberJson(f.conv_flops_fwd)},
         {"conv_flops_bwd", NumberJson(f.conv_flops_bwd)},
         {"dense_flops_fwd", NumberJson(f.dense_flops_fwd)},
         {"dense_flops_bwd", NumberJson(f.dense_flops_bwd)},
         {"other_flops_fwd", NumberJson(f.other_flops_fwd)},
         {"other_flops_bwd", NumberJson(f.other_flops_bwd)},
         {"activation_elements", NumberJson(f.activation_elements)},
         {"params", NumberJson(f.params)},
         {"conv_workspace_elements", NumberJson(f.conv_workspace_elements)},
         {"conv_output_elements", NumberJson(f.conv_output_elements)},
         {"conv_weight_elements", NumberJson(f.conv_weight_elements)},
         {"cpu_fused_flops_fwd", NumberJson(f.cpu_fused_flops_fwd)},
         {"cpu_fused_flops_bwd", NumberJson(f.cpu_fused_flops_bwd)},
         {"conv_layers", f.conv_layers},
         {"total_filters", f.total_filters},
         {"dense_layers", f.dense_layers},
         {"dense_nodes", f.dense_nodes},
         {"input_elements", f.input_elements}};
  for (const FeatureField& k : kCpuSkippedFeatures) j[k.name] = NumberJson(f.*k.value);
  return j;
}

// One JSON object of the file being read; messages are "<origin>: <path>.<key>: <problem>".
class Reader {
 public:
  Reader(const json& j, const std::string& origin, std::string path)
      : j_(j), origin_(origin), path_(std::move(path)) {}

  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void Fail(const std::string& where, const std::string& problem) const {
    std::string msg = (origin_.empty() ? std::string("calibration") : origin_) + ": ";
    if (!where.empty()) msg += where + ": ";
    msg += problem;
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    std::replace(msg.begin(), msg.end(), '\r', ' ');
    throw EstimateError(msg);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    Fail(at(key), problem);
  }

  // The object itself: must be one, with no key outside `allowed`.
  void object(const std::vector<const char*>& allowed) const {
    if (!j_.is_object()) Fail(path_, "must be a JSON object, got " + ShownJsonValue(j_));
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || it.key() == a;
      if (!ok) Fail(path_, "unknown key " + json(it.key()).dump());
    }
  }

  bool has(const char* key) const { return j_.contains(key); }
  const json& required(const char* key) const {
    if (!j_.contains(key)) fail(key, "required");
    return j_.at(key);
  }

  std::string string(const char* key, bool nonempty) const {
    const json& v = required(key);
    if (!v.is_string())
      fail(key, std::string(nonempty ? "must be a non-empty string" : "must be a string") +
                    ", got " + ShownJsonValue(v));
    std::string s = v.get<std::string>();
    if (nonempty && s.empty()) fail(key, "must be a non-empty string, got \"\"");
    return s;
  }

  // An integer in [min, max]; 3.0 is not an integer.
  int64_t integer(const char* key, int64_t min, int64_t max) const {
    const json& v = required(key);
    const std::string want = min == 1   ? "must be a positive integer"
                             : min == 0 ? "must be a non-negative integer"
                                        : "must be an integer";
    if (!v.is_number_integer()) fail(key, want + ", got " + ShownJsonValue(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max))
      fail(key, "must be at most " + std::to_string(max) + ", got " + ShownJsonValue(v));
    const int64_t x = v.get<int64_t>();
    if (x < min) fail(key, want + ", got " + ShownJsonValue(v));
    if (x > max) fail(key, "must be at most " + std::to_string(max) + ", got " + ShownJsonValue(v));
    return x;
  }

  enum class Sign { Any, NonNegative, Positive };
  double number(const char* key, Sign sign) const { return Number(required(key), at(key), sign); }
  double Number(const json& v, const std::string& where, Sign sign) const {
    const char* want = sign == Sign::Positive      ? "must be a positive number"
                       : sign == Sign::NonNegative ? "must be a non-negative number"
                                                   : "must be a number";
    if (!v.is_number()) Fail(where, std::string(want) + ", got " + ShownJsonValue(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || (sign == Sign::Positive && !(x > 0)) ||
        (sign == Sign::NonNegative && !(x >= 0)))
      Fail(where, std::string(want) + ", got " + ShownJsonValue(v));
    return x;
  }

  const json& j() const { return j_; }
  const std::string& origin() const { return origin_; }

 private:
  const json& j_;
  const std::string& origin_;
  std::string path_;
};

ModelFeatures ReadFeatures(const Reader& r) {
  using S = Reader::Sign;
  std::vector<const char*> keys{
      "conv_flops_fwd",          "conv_flops_bwd",       "dense_flops_fwd",      "dense_flops_bwd",
      "other_flops_fwd",         "other_flops_bwd",      "activation_elements",  "params",
      "conv_workspace_elements", "conv_output_elements", "conv_weight_elements", "conv_layers",
      "total_filters",           "dense_layers",         "dense_nodes",          "input_elements",
      "cpu_fused_flops_fwd",     "cpu_fused_flops_bwd"};
  for (const FeatureField& k : kCpuSkippedFeatures) keys.push_back(k.name);
  r.object(keys);
  ModelFeatures f;
  f.conv_flops_fwd = r.number("conv_flops_fwd", S::NonNegative);
  f.conv_flops_bwd = r.number("conv_flops_bwd", S::NonNegative);
  f.dense_flops_fwd = r.number("dense_flops_fwd", S::NonNegative);
  f.dense_flops_bwd = r.number("dense_flops_bwd", S::NonNegative);
  f.other_flops_fwd = r.number("other_flops_fwd", S::NonNegative);
  f.other_flops_bwd = r.number("other_flops_bwd", S::NonNegative);
  f.activation_elements = r.number("activation_elements", S::NonNegative);
  f.params = r.number("params", S::NonNegative);
  f.conv_workspace_elements = r.number("conv_workspace_elements", S::NonNegative);
  f.conv_output_elements = r.number("conv_output_elements", S::NonNegative);
  f.conv_layers = int(r.integer("conv_layers", 0, INT_MAX));
  f.total_filters = r.integer("total_filters", 0, std::numeric_limits<int64_t>::max());
  f.dense_layers = int(r.integer("dense_layers", 0, INT_MAX));
  f.dense_nodes = r.integer("dense_nodes", 0, std::numeric_limits<int64_t>::max());
  f.input_elements = r.integer("input_elements", 0, std::numeric_limits<int64_t>::max());
  // Files from before 2026-12-05 do not have it: what the other sums leave of the
  // parameters once the dense layers' (their forward FLOPs are 2 x weights + units) and the
  // convolutions' biases are taken off. Exact without batchnorm; with it, batchnorm's scale
  // and shift (2 per channel) are counted too, a few percent of a convolution's weights.
  f.conv_weight_elements =
      r.has("conv_weight_elements")
          ? r.number("conv_weight_elements", S::NonNegative)
          : std::max(0.0, f.params - (f.dense_flops_fwd + double(f.dense_nodes)) / 2 -
                              double(f.total_filters));
  // Files from before the CPU engine fused layers have neither: nothing was fused.
  if (r.has("cpu_fused_flops_fwd") || r.has("cpu_fused_flops_bwd")) {
    f.cpu_fused_flops_fwd = r.number("cpu_fused_flops_fwd", S::NonNegative);
    f.cpu_fused_flops_bwd = r.number("cpu_fused_flops_bwd", S::NonNegative);
  }
  // Files from before the CPU engine's skipped backward was counted: the sums were fitted
  // as they are, so nothing is taken off them.
  for (const FeatureField& k : kCpuSkippedFeatures)
    if (r.has(k.name)) f.*k.value = r.number(k.name, S::NonNegative);
  return f;
}

}  // namespace

ModelFeatures FeaturesFromJson(const nlohmann::json& j, const std::string& origin,
                               const std::string& path) {
  return ReadFeatures(Reader(j, origin, path));
}

json CalibrationToJson(const Calibration& c) {
  if (c.model.coef.size() != size_t(kTimeTerms))
    throw EstimateError("calibration for " + c.device + ": the time model has " +
                        std::to_string(c.model.coef.size()) + " coefficients, need " +
                        std::to_string(kTimeTerms));
  json samples = json::array();
  for (const TimingSample& s : c.samples) {
    samples.push_back(json{{"model", s.model},
                           {"batch", s.batch},
                           {"seconds", s.seconds},
                           {"joules", s.joules >= 0 ? json(s.joules) : json(nullptr)},
                           {"features", FeaturesJson(s.features)}});
  }
  const FitQuality& q = c.model.quality;
  json out = json{{"format_version", 1},
                  {"device", c.device},
                  {"host", c.host},
                  {"threads", c.threads},
                  {"created", c.created},
                  {"samples", samples},
                  {"model",
                   {{"terms", TimeTermNames()},
                    {"coef", c.model.coef},
                    {"quality",
                     {{"samples", q.samples},
                      {"folds", q.folds},
                      {"r2", q.r2},
                      {"mape", q.mape},
                      {"cv_mape", q.cv_mape},
                      {"cv_log_sigma", q.cv_log_sigma}}}}}};
  if (!c.engine.empty()) {
    out["engine"] = {{"fingerprint", c.engine}, {"compiler", c.compiler}, {"blas", c.blas}};
    if (!c.engine_sources.empty()) out["engine"]["sources"] = c.engine_sources;
  }
  if (!c.device_info.is_null()) out["device_info"] = c.device_info;
  if (!c.probe.is_null()) out["probe"] = c.probe;
  if (!c.thread_scaling.is_null()) out["thread_scaling"] = c.thread_scaling;
  if (!c.transferred_from.empty()) {
    out["transferred_from"] = c.transferred_from;
    out["transfer_log_sigma"] = c.transfer_log_sigma;
  }
  if (!c.optimizer_update.empty())
    out["optimizer_update"] = OptimizerUpdateCostToJson(c.optimizer_update);
  if (!c.activation_cost.empty()) out["activation_cost"] = ActivationCostToJson(c.activation_cost);
  if (!c.layer_model.empty()) {
    out["layer_model"] = {{"coef", c.layer_model.coef},
                          {"samples", c.layer_model.samples},
                          {"step_error", c.layer_model.step_error}};
  }
  if (c.gpu_layer_model.present) {
    const StoredGpuLayerModel& g = c.gpu_layer_model;
    json params = json::object();
    const std::vector<double> v = GpuLayerParamValues(g.params);
    for (size_t i = 0; i < v.size(); ++i) params[GpuLayerParamNames()[i]] = v[i];
    out["gpu_layer_model"] = {{"params", params},
                              {"overlap", g.params.overlap},
                              {"peaks",
                               {{"name", g.peaks.name},
                                {"fp32_tflops", g.peaks.fp32_tflops},
                                {"tf32_tflops", g.peaks.tf32_tflops},
                                {"bandwidth_gbs", g.peaks.bandwidth_gbs},
                                {"sms", g.peaks.sms}}},
                              {"samples", g.samples},
                              {"mape", g.mape},
                              {"cv_mape", g.cv_mape},
                              {"fitted_to", g.fitted_to},
                              {"validation_mape", g.validation_mape},
                              {"validation_models", g.validation_models}};
  }
  return out;
}

Calibration CalibrationFromJson(const json& j, const std::string& origin) {
  using S = Reader::Sign;
  const Reader top(j, origin, "");
  top.object({"format_version", "device", "host", "threads", "created", "engine", "device_info",
              "probe", "thread_scaling", "transferred_from", "transfer_log_sigma", "samples",
              "layer_model", "gpu_layer_model", "optimizer_update", "activation_cost", "model"});
  {
    const json& v = top.required("format_version");
    if (!v.is_number_integer())
      top.fail("format_version", "must be an integer, got " + ShownJsonValue(v));
    if (v != 1)
      top.fail("format_version",
               "unsupported version " + ShownJsonValue(v) + " (this build reads 1)");
  }
  Calibration c;
  c.device = top.string("device", true);
  c.host = top.string("host", false);
  c.threads = int(top.integer("threads", 0, INT_MAX));
  c.created = top.string("created", true);
  if (j.contains("engine")) {
    const Reader e(top.required("engine"), origin, "engine");
    e.object({"fingerprint", "compiler", "blas", "sources"});
    c.engine = e.string("fingerprint", true);
    c.compiler = e.string("compiler", false);
    c.blas = e.string("blas", false);
    if (e.has("sources")) {
      const json& sources = e.required("sources");
      if (!sources.is_object())
        e.fail("sources",
               "must be an object of file paths and their hashes, got " + ShownJsonValue(sources));
      for (auto it = sources.begin(); it != sources.end(); ++it) {
        if (!it->is_string() || it->get<std::string>().empty())
          e.Fail(e.at("sources") + "." + it.key(),
                 "must be the file's hash, a non-empty string, got " + ShownJsonValue(*it));
        c.engine_sources[it.key()] = it->get<std::string>();
      }
    }
  }
  if (j.contains("device_info")) {
    c.device_info = top.required("device_info");
    if (!c.device_info.is_object())
      top.fail("device_info", "must be an object, got " + ShownJsonValue(c.device_info));
  }
  if (j.contains("probe")) {
    c.probe = top.required("probe");
    if (!c.probe.is_object())
      top.fail("probe", "must be an object, got " + ShownJsonValue(c.probe));
  }
  if (j.contains("thread_scaling")) {
    c.thread_scaling = top.required("thread_scaling");
    const nlohmann::json& t = c.thread_scaling;
    bool ok = t.is_object() && t.contains("threads") && t.contains("step_time_ratio") &&
              t["threads"].is_array() && t["step_time_ratio"].is_array() &&
              t["threads"].size() == t["step_time_ratio"].size() && !t["threads"].empty();
    for (size_t i = 0; ok && i < t["threads"].size(); ++i)
      ok = t["threads"][i].is_number_integer() && t["threads"][i].get<int>() == int(i) + 1 &&
           t["step_time_ratio"][i].is_number() && t["step_time_ratio"][i].get<double>() > 0;
    if (!ok)
      top.fail("thread_scaling",
               "must be {\"threads\": [1, 2, ...], \"step_time_ratio\": [positive, one per "
               "count]}, got " +
                   ShownJsonValue(t));
  }
  if (j.contains("optimizer_update"))
    c.optimizer_update = OptimizerUpdateCostFromJson(j["optimizer_update"], origin);
  if (j.contains("activation_cost"))
    c.activation_cost = ActivationCostFromJson(j["activation_cost"], origin);
  if (j.contains("transferred_from") || j.contains("transfer_log_sigma")) {
    c.transferred_from = top.string("transferred_from", true);
    c.transfer_log_sigma = top.number("transfer_log_sigma", S::NonNegative);
  }

  const json& samples = top.required("samples");
  if (!samples.is_array()) top.fail("samples", "must be an array, got " + ShownJsonValue(samples));
  for (size_t i = 0; i < samples.size(); ++i) {
    const Reader r(samples[i], origin, "samples[" + std::to_string(i) + "]");
    r.object({"model", "batch", "seconds", "joules", "features"});
    TimingSample s;
    s.model = r.string("model", false);
    s.batch = r.integer("batch", 1, std::numeric_limits<int64_t>::max());
    s.seconds = r.number("seconds", S::Positive);
    const json& joules = r.required("joules");
    if (!joules.is_null() &&
        !(joules.is_number() && joules.get<double>() >= 0 && std::isfinite(joules.get<double>())))
      r.fail("joules", "must be null or a non-negative number, got " + ShownJsonValue(joules));
    s.joules = joules.is_null() ? -1 : joules.get<double>();
    s.features = ReadFeatures(Reader(r.required("features"), origin, r.at("features")));
    c.samples.push_back(std::move(s));
  }

  if (j.contains("layer_model")) {
    const Reader l(top.required("layer_model"), origin, "layer_model");
    l.object({"coef", "samples", "step_error"});
    const json& coef = l.required("coef");
    // Older files (layer_time_model.hpp): kPerLayerTimeTerms coefficients from before the
    // layer model's own two terms, those and its own two from before the per-sample
    // convolution terms; each loads with the terms it lacks 0.
    constexpr size_t kOlder = size_t(kPerLayerTimeTerms), kOld = kOlder + 2;
    if (!coef.is_array() ||
        (coef.size() != size_t(kLayerTerms) && coef.size() != kOld && coef.size() != kOlder))
      l.fail("coef", "must be an array of " + std::to_string(kLayerTerms) +
                         " non-negative numbers (one per term), got " + ShownJsonValue(coef));
    std::vector<double>& to = c.layer_model.coef;
    for (size_t k = 0; k < coef.size(); ++k)
      to.push_back(l.Number(coef[k], l.at("coef") + "[" + std::to_string(k) + "]", S::NonNegative));
    if (to.size() == kOld) to.insert(to.begin() + kOlder, size_t(kTimeTerms) - kOlder, 0.0);
    to.resize(size_t(kLayerTerms), 0.0);
    c.layer_model.samples = int(l.integer("samples", 0, INT_MAX));
    c.layer_model.step_error = l.number("step_error", S::NonNegative);
  }

  if (j.contains("gpu_layer_model")) {
    const Reader g(top.required("gpu_layer_model"), origin, "gpu_layer_model");
    g.object({"params", "overlap", "peaks", "samples", "mape", "cv_mape", "fitted_to",
              "validation_mape", "validation_models"});
    const Reader p(g.required("params"), origin, g.at("params"));
    std::vector<const char*> names;
    for (const std::string& n : GpuLayerParamNames()) names.push_back(n.c_str());
    p.object(names);
    std::vector<double> values;
    for (const char* n : names) values.push_back(p.number(n, S::Positive));
    StoredGpuLayerModel& m = c.gpu_layer_model;
    m.params = GpuLayerParamsFrom(values);
    for (size_t i = 0; i < 4; ++i)  // the efficiencies: fractions of a peak
      if (values[i] > 1)
        p.fail(names[i], "must be at most 1, got " + ShownJsonValue(p.required(names[i])));
    const json& overlap = g.required("overlap");
    if (!overlap.is_boolean())
      g.fail("overlap", "must be true or false, got " + ShownJsonValue(overlap));
    m.params.overlap = overlap.get<bool>();
    const Reader k(g.required("peaks"), origin, g.at("peaks"));
    k.object({"name", "fp32_tflops", "tf32_tflops", "bandwidth_gbs", "sms"});
    m.peaks.name = k.string("name", true);
    m.peaks.fp32_tflops = k.number("fp32_tflops", S::Positive);
    m.peaks.tf32_tflops = k.number("tf32_tflops", S::Positive);
    m.peaks.bandwidth_gbs = k.number("bandwidth_gbs", S::Positive);
    m.peaks.sms = int(k.integer("sms", 1, 100000));
    m.samples = int(g.integer("samples", 0, INT_MAX));
    m.mape = g.number("mape", S::NonNegative);
    m.cv_mape = g.number("cv_mape", S::NonNegative);
    m.fitted_to = g.string("fitted_to", true);
    m.validation_mape = g.number("validation_mape", S::NonNegative);
    m.validation_models = int(g.integer("validation_models", 0, INT_MAX));
    m.present = true;
  }

  const Reader m(top.required("model"), origin, "model");
  m.object({"terms", "coef", "quality"});
  {
    const json& terms = m.required("terms");
    // The count comes from the names rather than from expected.size(): GCC 12 with
    // -fsanitize=thread warns (-Warray-bounds, a false positive) about json::size() here.
    const std::vector<std::string>& names = TimeTermNames();
    const json expected(names);
    // Older files name a prefix of today's terms (time_model.hpp): kLegacyTimeTerms or
    // kPerLayerTimeTerms of them.
    int count = kTimeTerms;
    for (int older : {kLegacyTimeTerms, kPerLayerTimeTerms})
      if (terms == json(std::vector<std::string>(names.begin(), names.begin() + older)))
        count = older;
    if (terms != expected && count == kTimeTerms) {
      // Name the first wrong term: the whole list would be long, and values are shown by
      // kind only (ShownJsonValue).
      if (terms.is_array() && terms.size() == names.size())
        for (size_t i = 0; i < names.size(); ++i)
          if (terms[i] != expected[i])
            m.fail("terms[" + std::to_string(i) + "]",
                   "must be " + expected[i].dump() + ", got " + ShownJsonValue(terms[i]));
      m.fail("terms", "must be " + expected.dump() + ", got " + ShownJsonValue(terms));
    }
    const json& coef = m.required("coef");
    if (!coef.is_array() || coef.size() != size_t(count))
      m.fail("coef", "must be an array of " + std::to_string(count) +
                         " non-negative numbers (one per term), got " + ShownJsonValue(coef));
    for (size_t k = 0; k < coef.size(); ++k)
      c.model.coef.push_back(
          m.Number(coef[k], m.at("coef") + "[" + std::to_string(k) + "]", S::NonNegative));
    c.model.coef.resize(size_t(kTimeTerms), 0.0);  // an older file: the terms it lacks are 0
  }
  const Reader q(m.required("quality"), origin, m.at("quality"));
  q.object({"samples", "folds", "r2", "mape", "cv_mape", "cv_log_sigma"});
  c.model.quality.samples = int(q.integer("samples", 0, INT_MAX));
  c.model.quality.folds = int(q.integer("folds", 0, INT_MAX));
  c.model.quality.r2 = q.number("r2", S::Any);
  c.model.quality.mape = q.number("mape", S::NonNegative);
  c.model.quality.cv_mape = q.number("cv_mape", S::NonNegative);
  // Files from before the prediction band have none: 0, and the band falls back to cv_mape.
  if (q.has("cv_log_sigma"))
    c.model.quality.cv_log_sigma = q.number("cv_log_sigma", S::NonNegative);
  c.model.device = c.device;
  return c;
}

namespace {

constexpr size_t kMaxCalibrationBytes = size_t(64) << 20;

[[noreturn]] void FileFail(const std::string& path, const std::string& problem) {
  std::string msg = path + ": " + problem;
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  throw EstimateError(msg);
}

}  // namespace

Calibration LoadCalibration(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, kMaxCalibrationBytes, &text, &why)) {
    if (why.rfind("larger than", 0) == 0) why += ", not a calibration file";
    FileFail(path, "cannot read: " + why);
  }
  json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem))
    FileFail(path, (problem.path.empty() ? "" : problem.path + ": ") + problem.message);
  return CalibrationFromJson(j, path);
}

std::string CalibrationStaleness(const Calibration& c) {
  const std::string why = EngineDifference(c.device, c.engine, c.engine_sources);
  return why.empty() ? "" : why + ": recalibrate (dlh-estimate calibrate)";
}

void SaveCalibration(const std::string& path, const Calibration& c) {
  try {
    WriteFileAtomically(path, CalibrationToJson(c).dump(2) + "\n");
  } catch (const IoError& e) {
    // IoError says "<path>: cannot write: <reason>"; the estimator's file errors are
    // EstimateError (dlh-estimate exit code 2), one line like every other FileFail.
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    throw EstimateError(msg);
  }
}

int CalibrationThreads(const Calibration& c) {
  if (c.threads > 0) return c.threads;
  // CpuDescription() ends with ", N cores" (N from the affinity mask at calibration time).
  const std::string suffix = " cores";
  const size_t end = c.host.rfind(suffix);
  if (end == std::string::npos || end + suffix.size() != c.host.size()) return 1;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(c.host[begin - 1]))) --begin;
  if (begin == end || end - begin > 4) return 1;
  return std::max(1, std::stoi(c.host.substr(begin, end - begin)));
}

}  // namespace dlh
