// DLH — the training spec: parsing, validation, shape propagation (the learning rate it
// sets: learning_rate.cpp).
#include "common/spec.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "common/spec_reader.hpp"

namespace dlh {

using nlohmann::json;

namespace {

using namespace spec_reader;

constexpr size_t kMaxSpecBytes = 1u << 20;  // a spec is a few hundred bytes

// ---------------------------------------------------------------- parsing

const char* const kWeightInitNames[] = {"he_normal", "he_uniform", "glorot_normal",
                                        "glorot_uniform", "torch_default"};
const char* const kBiasInitNames[] = {"zeros", "torch_default"};
// In the order of Precision and Tf32Use.
const char* const kPrecisionNames[] = {"fp32", "bf16"};
const char* const kTf32Names[] = {"convolutions", "all", "none"};

WeightInit ParseWeightInit(const Obj& o, WeightInit def) {
  return WeightInit(o.choice("init",
                             {kWeightInitNames[0], kWeightInitNames[1], kWeightInitNames[2],
                              kWeightInitNames[3], kWeightInitNames[4]},
                             false, size_t(def)));
}

// A conv2d's or dense layer's "init" and "bias_init".
void ParseParamInit(const Obj& o, WeightInit spec_default, LayerSpec* l) {
  l->init = ParseWeightInit(o, spec_default);
  const BiasInit bias_default =
      l->init == WeightInit::TorchDefault ? BiasInit::TorchDefault : BiasInit::Zeros;
  l->bias_init = BiasInit(
      o.choice("bias_init", {kBiasInitNames[0], kBiasInitNames[1]}, false, size_t(bias_default)));
}

LayerSpec ParseLayer(const json& v, const std::string& origin, const std::string& path,
                     WeightInit init, int depth);

// A non-empty array of layers at `path` (a residual block's "layers" or "shortcut").
std::vector<LayerSpec> ParseLayerList(const Obj& o, const char* key, const std::string& origin,
                                      WeightInit init, int depth) {
  const json& list = o.get(key);
  if (!list.is_array() || list.empty())
    o.fail(key, "must be a non-empty array of layers, got " + ShownJsonValue(list));
  std::vector<LayerSpec> out;
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(
        ParseLayer(list[i], origin, o.at(key) + "[" + std::to_string(i) + "]", init, depth));
  return out;
}

LayerSpec ParseLayer(const json& v, const std::string& origin, const std::string& path,
                     WeightInit init, int depth) {
  RequireObject(v, origin, path);
  Obj o(v, origin, path);
  LayerSpec l;
  static const LayerKind kinds[] = {
      LayerKind::Conv2d,          LayerKind::MaxPool2d, LayerKind::Dense,     LayerKind::Relu,
      LayerKind::Flatten,         LayerKind::Dropout,   LayerKind::BatchNorm, LayerKind::AvgPool2d,
      LayerKind::GlobalAvgPool2d, LayerKind::Gelu,      LayerKind::Silu,      LayerKind::Residual};
  l.kind = kinds[o.choice("type",
                          {"conv2d", "maxpool2d", "dense", "relu", "flatten", "dropout",
                           "batchnorm", "avgpool2d", "globalavgpool2d", "gelu", "silu", "residual"},
                          true, 0)];
  switch (l.kind) {
    case LayerKind::Conv2d:
      o.only({"type", "filters", "kernel", "stride", "padding", "init", "bias_init"});
      ParseParamInit(o, init, &l);
      l.filters = o.integer("filters", 1, true, 0);
      l.kernel = o.integer("kernel", 1, true, 0);
      l.stride = o.integer("stride", 1, false, 1);
      l.padding = o.integer("padding", 0, false, 0);
      if (l.padding >= l.kernel)
        o.fail("padding", "must be less than kernel (" + std::to_string(l.kernel) + "), got " +
                              o.shown("padding"));
      break;
    case LayerKind::MaxPool2d:
    case LayerKind::AvgPool2d:
      o.only({"type", "kernel", "stride", "padding"});
      l.kernel = o.integer("kernel", 1, true, 0);
      l.stride = o.integer("stride", 1, false, l.kernel);
      l.padding = o.integer("padding", 0, false, 0);
      if (l.padding > l.kernel / 2)
        o.fail("padding", "must be at most kernel/2 (" + std::to_string(l.kernel / 2) + "), got " +
                              o.shown("padding"));
      break;
    case LayerKind::Dense:
      o.only({"type", "units", "init", "bias_init"});
      ParseParamInit(o, init, &l);
      l.units = o.integer("units", 1, true, 0);
      break;
    case LayerKind::Dropout:
      o.only({"type", "rate"});
      l.rate = o.number("rate", true, 0);
      if (!(l.rate >= 0 && l.rate < 1)) o.fail("rate", "must be in [0, 1), got " + o.shown("rate"));
      break;
    case LayerKind::BatchNorm:
      o.only({"type", "momentum", "epsilon"});
      l.momentum = o.number("momentum", false, l.momentum);
      if (!(l.momentum > 0 && l.momentum <= 1))
        o.fail("momentum", "must be in (0, 1], got " + o.shown("momentum"));
      l.epsilon = o.number("epsilon", false, l.epsilon);
      if (!(l.epsilon > 0))
        o.fail("epsilon", "must be a positive number, got " + o.shown("epsilon"));
      break;
    case LayerKind::Residual:
      o.only({"type", "layers", "shortcut"});
      if (depth >= kMaxResidualDepth)
        o.fail("", "residual blocks nest at most " + std::to_string(kMaxResidualDepth) + " deep");
      o.required("layers");
      l.layers = ParseLayerList(o, "layers", origin, init, depth + 1);
      if (o.has("shortcut")) l.shortcut = ParseLayerList(o, "shortcut", origin, init, depth + 1);
      break;
    case LayerKind::Relu:
    case LayerKind::Flatten:
    case LayerKind::GlobalAvgPool2d:
    case LayerKind::Gelu:
    case LayerKind::Silu:
      o.only({"type"});
      break;
  }
  return l;
}

OptimizerSpec ParseOptimizer(const json& v, const std::string& origin) {
  RequireObject(v, origin, "optimizer");
  Obj o(v, origin, "optimizer");
  OptimizerSpec opt;
  opt.kind = o.choice("type", {"sgd", "adam"}, true, 0) == 0 ? OptimizerSpec::Kind::Sgd
                                                             : OptimizerSpec::Kind::Adam;
  if (opt.kind == OptimizerSpec::Kind::Sgd)
    o.only({"type", "lr", "momentum", "nesterov", "weight_decay"});
  else
    o.only({"type", "lr", "beta1", "beta2", "epsilon", "weight_decay"});

  opt.lr = o.number("lr", true, 0);
  if (!(opt.lr > 0)) o.fail("lr", "must be a positive number, got " + o.shown("lr"));
  opt.weight_decay = o.number("weight_decay", false, 0);
  if (!(opt.weight_decay >= 0))
    o.fail("weight_decay", "must be a non-negative number, got " + o.shown("weight_decay"));

  if (opt.kind == OptimizerSpec::Kind::Sgd) {
    opt.momentum = o.number("momentum", false, 0);
    if (!(opt.momentum >= 0 && opt.momentum < 1))
      o.fail("momentum", "must be in [0, 1), got " + o.shown("momentum"));
    opt.nesterov = o.boolean("nesterov", false);
    if (opt.nesterov && opt.momentum <= 0)
      o.fail("nesterov",
             "requires momentum > 0, got " + (o.has("momentum") ? "momentum " + o.shown("momentum")
                                                                : std::string("no momentum")));
  } else {
    opt.beta1 = o.number("beta1", false, opt.beta1);
    if (!(opt.beta1 >= 0 && opt.beta1 < 1))
      o.fail("beta1", "must be in [0, 1), got " + o.shown("beta1"));
    opt.beta2 = o.number("beta2", false, opt.beta2);
    if (!(opt.beta2 >= 0 && opt.beta2 < 1))
      o.fail("beta2", "must be in [0, 1), got " + o.shown("beta2"));
    opt.epsilon = o.number("epsilon", false, opt.epsilon);
    if (!(opt.epsilon > 0))
      o.fail("epsilon", "must be a positive number, got " + o.shown("epsilon"));
  }
  return opt;
}

ScheduleSpec ParseSchedule(const json& v, const std::string& origin, double lr, int epochs) {
  RequireObject(v, origin, "schedule");
  Obj o(v, origin, "schedule");
  o.only({"warmup_epochs", "decay", "step_epochs", "gamma", "min_lr", "pct_start", "div_factor",
          "final_div_factor"});
  ScheduleSpec s;
  static const ScheduleSpec::Decay decays[] = {
      ScheduleSpec::Decay::Constant, ScheduleSpec::Decay::Step, ScheduleSpec::Decay::Cosine,
      ScheduleSpec::Decay::OneCycle};
  static const char* const names[] = {"constant", "step", "cosine", "onecycle"};
  size_t d = o.choice("decay", {"constant", "step", "cosine", "onecycle"}, false, 0);
  s.decay = decays[d];

  s.warmup_epochs = o.number("warmup_epochs", false, 0);
  if (!(s.warmup_epochs >= 0))
    o.fail("warmup_epochs", "must be a non-negative number, got " + o.shown("warmup_epochs"));
  if (s.warmup_epochs > epochs)
    o.fail("warmup_epochs", "must not exceed epochs (" + std::to_string(epochs) + "), got " +
                                o.shown("warmup_epochs"));

  // Keys that only one decay reads: reject them elsewhere rather than ignore them.
  auto only_for = [&](const char* key, size_t want) {
    if (o.has(key) && d != want)
      o.fail(key, std::string("only used with \"decay\": \"") + names[want] + "\", got decay " +
                      Quoted(names[d]));
  };
  only_for("step_epochs", 1);
  only_for("gamma", 1);
  only_for("min_lr", 2);
  only_for("pct_start", 3);
  only_for("div_factor", 3);
  only_for("final_div_factor", 3);

  if (s.decay == ScheduleSpec::Decay::Step) {
    if (!o.has("step_epochs")) o.fail("step_epochs", "required for \"step\" decay");
    s.step_epochs = o.number("step_epochs", true, 0);
    if (!(s.step_epochs > 0))
      o.fail("step_epochs", "must be a positive number, got " + o.shown("step_epochs"));
    s.gamma = o.number("gamma", false, s.gamma);
    if (!(s.gamma > 0 && s.gamma <= 1))
      o.fail("gamma", "must be in (0, 1], got " + o.shown("gamma"));
  } else if (s.decay == ScheduleSpec::Decay::Cosine) {
    s.min_lr = o.number("min_lr", false, 0);
    if (!(s.min_lr >= 0))
      o.fail("min_lr", "must be a non-negative number, got " + o.shown("min_lr"));
    if (!(s.min_lr < lr))
      o.fail("min_lr",
             "must be less than optimizer.lr (" + Num(lr) + "), got " + o.shown("min_lr"));
  } else if (s.decay == ScheduleSpec::Decay::OneCycle) {
    if (o.has("warmup_epochs"))
      o.fail("warmup_epochs",
             "not used with \"decay\": \"onecycle\", which warms up itself "
             "(pct_start)");
    s.pct_start = o.number("pct_start", false, s.pct_start);
    if (!(s.pct_start > 0 && s.pct_start < 1))
      o.fail("pct_start", "must be in (0, 1), got " + o.shown("pct_start"));
    s.div_factor = o.number("div_factor", false, s.div_factor);
    if (!(s.div_factor >= 1))
      o.fail("div_factor", "must be a number >= 1, got " + o.shown("div_factor"));
    s.final_div_factor = o.number("final_div_factor", false, s.final_div_factor);
    if (!(s.final_div_factor >= 1))
      o.fail("final_div_factor", "must be a number >= 1, got " + o.shown("final_div_factor"));
  }
  return s;
}

std::string DefaultName(const std::string& origin) {
  std::string stem = std::filesystem::path(origin).stem().string();
  return stem.empty() || stem == "-" ? "spec" : stem;
}

}  // namespace

// ---------------------------------------------------------------- public API

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::Conv2d:
      return "conv2d";
    case LayerKind::MaxPool2d:
      return "maxpool2d";
    case LayerKind::Dense:
      return "dense";
    case LayerKind::Relu:
      return "relu";
    case LayerKind::Flatten:
      return "flatten";
    case LayerKind::Dropout:
      return "dropout";
    case LayerKind::BatchNorm:
      return "batchnorm";
    case LayerKind::AvgPool2d:
      return "avgpool2d";
    case LayerKind::GlobalAvgPool2d:
      return "globalavgpool2d";
    case LayerKind::Gelu:
      return "gelu";
    case LayerKind::Silu:
      return "silu";
    case LayerKind::Residual:
      return "residual";
  }
  return "unknown";
}

const char* WeightInitName(WeightInit init) { return kWeightInitNames[size_t(init)]; }
const char* PrecisionName(Precision p) { return kPrecisionNames[size_t(p)]; }
const char* Tf32UseName(Tf32Use t) { return kTf32Names[size_t(t)]; }
const char* BiasInitName(BiasInit init) { return kBiasInitNames[size_t(init)]; }

TrainSpec ParseSpec(const std::string& json_text, const std::string& origin,
                    const std::string& base_dir) {
  json root;
  JsonProblem problem;
  if (!ParseJsonStrict(json_text, &root, &problem)) Fail(origin, problem.path, problem.message);
  if (!root.is_object()) Fail(origin, "", "must be a JSON object, got " + ShownJsonValue(root));

  Obj o(root, origin, "");
  o.only({"name", "input", "classes", "layers", "optimizer", "schedule", "batch_size", "epochs",
          "seed", "init", "label_smoothing", "augment", "sync", "parallel", "precision", "tf32",
          "dataset"});

  TrainSpec spec;
  spec.origin = origin;
  spec.json = json_text;

  spec.name = o.string("name", false, DefaultName(origin));
  if (spec.name.empty()) o.fail("name", "must not be empty");
  for (unsigned char c : spec.name)
    if (c < 0x20 || c == 0x7f)
      o.fail("name", "must not contain control characters, got " + o.shown("name"));

  {
    const json& in = RequireObject(o.required("input"), origin, "input");
    Obj io(in, origin, "input");
    io.only({"channels", "height", "width"});
    spec.input.channels = io.integer("channels", 1, true, 0);
    spec.input.height = io.integer("height", 1, true, 0);
    spec.input.width = io.integer("width", 1, true, 0);
  }
  spec.classes = o.integer("classes", 2, true, 0);

  {
    const json& layers = o.required("layers");
    if (!layers.is_array() || layers.empty())
      o.fail("layers", "must be a non-empty array of layers, got " + ShownJsonValue(layers));
    spec.init = ParseWeightInit(o, spec.init);
    for (size_t i = 0; i < layers.size(); ++i)
      spec.layers.push_back(
          ParseLayer(layers[i], origin, "layers[" + std::to_string(i) + "]", spec.init, 0));
  }
  spec.label_smoothing = o.number("label_smoothing", false, 0);
  if (!(spec.label_smoothing >= 0 && spec.label_smoothing < 1))
    o.fail("label_smoothing", "must be in [0, 1), got " + o.shown("label_smoothing"));

  spec.optimizer = ParseOptimizer(o.required("optimizer"), origin);
  spec.batch_size = o.integer("batch_size", 1, true, 0);
  spec.epochs = o.integer("epochs", 1, true, 0);
  if (o.has("schedule"))
    spec.schedule = ParseSchedule(o.get("schedule"), origin, spec.optimizer.lr, spec.epochs);
  spec.seed = o.unsigned64("seed", 0);
  if (o.has("augment")) {
    Obj a(RequireObject(o.get("augment"), origin, "augment"), origin, "augment");
    a.only({"crop_padding", "flip"});
    spec.augment.crop_padding = a.integer("crop_padding", 0, false, 0);
    spec.augment.flip = a.boolean("flip", false);
    if (spec.augment.crop_padding > 0 && (spec.augment.crop_padding >= spec.input.height ||
                                          spec.augment.crop_padding >= spec.input.width))
      a.fail("crop_padding", "must be less than the input's height and width (" +
                                 std::to_string(spec.input.height) + "x" +
                                 std::to_string(spec.input.width) + "), got " +
                                 a.shown("crop_padding"));
  }

  if (o.has("sync")) spec.sync = ParseSync(o.get("sync"), origin);
  if (o.has("parallel")) spec.parallel = ParseParallel(o.get("parallel"), origin, spec);

  spec.precision = Precision(o.choice("precision", {kPrecisionNames[0], kPrecisionNames[1]}, false,
                                      size_t(Precision::Fp32)));
  spec.tf32 = Tf32Use(o.choice("tf32", {kTf32Names[0], kTf32Names[1], kTf32Names[2]}, false,
                               size_t(Tf32Use::Convolutions)));

  spec.dataset = o.string("dataset", true, "");
  if (spec.dataset.empty()) o.fail("dataset", "must not be empty");
  {
    std::filesystem::path p(spec.dataset);
    if (p.is_relative() && !base_dir.empty())
      spec.dataset = (std::filesystem::path(base_dir) / p).string();
  }

  LayerShapes(spec);  // throws when the layers do not fit together
  return spec;
}

TrainSpec LoadSpec(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, kMaxSpecBytes, &text, &why)) {
    if (why.rfind("larger than", 0) == 0) why += ", not a spec";
    Fail(path, "", "cannot read: " + why);
  }
  return ParseSpec(text, path, std::filesystem::path(path).parent_path().string());
}

namespace {

std::string Dims(const Shape3& s) {
  return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" +
         std::to_string(s.width);
}

// Values per sample must fit an int. Checked factor by factor, in int64: three values near
// INT_MAX overflow even the int64 product of Shape3::elements() (undefined behaviour), and
// a conv2d output side can exceed INT_MAX (both seen under tests/fuzz/spec_fuzz).
void CheckNotTooLarge(const std::string& origin, const std::string& path, const std::string& what,
                      int64_t c, int64_t h, int64_t w) {
  if (h > INT_MAX || w > INT_MAX || h * w > INT_MAX || c * (h * w) > INT_MAX)
    Fail(origin, path,
         what + std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w) +
             " is too large: more than " + std::to_string(INT_MAX) + " values per sample");
}

// What made a path's values flat (a flatten or dense layer), for messages; empty while the
// input is still spatial.
struct Flatness {
  std::string by;  // e.g. "dense at layers[4]"
};

// The shapes through `layers` from `in` (size layers.size() + 1). `flat` is updated as
// flatten and dense layers make the values flat.
std::vector<Shape3> WalkShapes(const std::vector<LayerSpec>& layers, const Shape3& in,
                               const std::string& origin, const std::string& path, Flatness* flat) {
  std::vector<Shape3> shapes{in};
  Shape3 s = in;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const std::string at = path + "[" + std::to_string(i) + "]";
    switch (l.kind) {
      case LayerKind::Conv2d:
      case LayerKind::MaxPool2d:
      case LayerKind::AvgPool2d:
      case LayerKind::GlobalAvgPool2d: {
        const char* name = LayerKindName(l.kind);
        if (!flat->by.empty())
          Fail(origin, at,
               std::string(name) + " needs a spatial input, but its input is flat (" +
                   std::to_string(s.elements()) + " values) after " + flat->by);
        if (l.kind == LayerKind::GlobalAvgPool2d) {
          s = Shape3{s.channels, 1, 1};
          break;
        }
        if (l.kernel <= 0)
          Fail(origin, at + ".kernel",
               "must be a positive integer, got " + std::to_string(l.kernel));
        if (l.stride <= 0)
          Fail(origin, at + ".stride",
               "must be a positive integer, got " + std::to_string(l.stride));
        if (l.padding < 0)
          Fail(origin, at + ".padding",
               "must be a non-negative integer, got " + std::to_string(l.padding));
        if (l.kind == LayerKind::Conv2d && l.filters <= 0)
          Fail(origin, at + ".filters",
               "must be a positive integer, got " + std::to_string(l.filters));
        int64_t ph = int64_t(s.height) + 2 * int64_t(l.padding);
        int64_t pw = int64_t(s.width) + 2 * int64_t(l.padding);
        if (l.kernel > ph || l.kernel > pw)
          Fail(origin, at + ".kernel",
               std::to_string(l.kernel) + " does not fit the " + std::to_string(s.height) + "x" +
                   std::to_string(s.width) + " input (padding " + std::to_string(l.padding) + ")");
        const int64_t oc = l.kind == LayerKind::Conv2d ? l.filters : s.channels;
        const int64_t oh = (ph - l.kernel) / l.stride + 1, ow = (pw - l.kernel) / l.stride + 1;
        CheckNotTooLarge(origin, at, "output ", oc, oh, ow);
        s = Shape3{int(oc), int(oh), int(ow)};
        break;
      }
      case LayerKind::Dense:
        if (l.units <= 0)
          Fail(origin, at + ".units", "must be a positive integer, got " + std::to_string(l.units));
        if (flat->by.empty() && (s.height != 1 || s.width != 1))
          Fail(origin, at,
               "dense needs a flat input: add a flatten layer before it (its input is " + Dims(s) +
                   ")");
        s = Shape3{l.units, 1, 1};
        flat->by = "dense at " + at;
        break;
      case LayerKind::Flatten:
        s = Shape3{int(s.elements()), 1, 1};  // at most INT_MAX: every shape was checked
        flat->by = "flatten at " + at;
        break;
      case LayerKind::Dropout:
        if (!(l.rate >= 0 && l.rate < 1))
          Fail(origin, at + ".rate", "must be in [0, 1), got " + Num(l.rate));
        break;
      case LayerKind::Residual: {
        if (l.layers.empty()) Fail(origin, at + ".layers", "must not be empty");
        // Both paths start from the block's input, flat or not.
        Flatness main_flat = *flat, short_flat = *flat;
        const Shape3 main_out = WalkShapes(l.layers, s, origin, at + ".layers", &main_flat).back();
        const Shape3 short_out =
            l.shortcut.empty()
                ? s
                : WalkShapes(l.shortcut, s, origin, at + ".shortcut", &short_flat).back();
        if (!(main_out == short_out))
          Fail(origin, at,
               "the main path (\"layers\") outputs " + Dims(main_out) + " but the " +
                   (l.shortcut.empty() ? std::string("identity shortcut passes the input, ")
                                       : std::string("shortcut outputs ")) +
                   Dims(short_out) +
                   (l.shortcut.empty()
                        ? "; add a \"shortcut\" that projects it (a conv2d with kernel 1)"
                        : ""));
        if (!main_flat.by.empty() && flat->by.empty()) *flat = main_flat;
        s = main_out;
        break;
      }
      case LayerKind::Relu:
      case LayerKind::BatchNorm:
      case LayerKind::Gelu:
      case LayerKind::Silu:
        break;
    }
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace

std::vector<Shape3> PathShapes(const std::vector<LayerSpec>& layers, const Shape3& in,
                               const std::string& origin, const std::string& path) {
  Flatness flat;
  return WalkShapes(layers, in, origin, path, &flat);
}

std::vector<Shape3> LayerShapes(const TrainSpec& spec) {
  const std::string& origin = spec.origin;
  if (spec.input.channels <= 0 || spec.input.height <= 0 || spec.input.width <= 0)
    Fail(origin, "input", "dimensions must be positive, got " + Dims(spec.input));
  if (spec.layers.empty()) Fail(origin, "layers", "must not be empty");
  CheckNotTooLarge(origin, "input", "", spec.input.channels, spec.input.height, spec.input.width);

  Flatness flat;
  std::vector<Shape3> shapes = WalkShapes(spec.layers, spec.input, origin, "layers", &flat);
  const Shape3 s = shapes.back();
  const LayerSpec& last = spec.layers.back();
  if (last.kind != LayerKind::Dense)
    Fail(origin, "layers",
         std::string("the last layer must be dense (softmax cross-entropy follows it), it is ") +
             LayerKindName(last.kind));
  if (!(s == Shape3{spec.classes, 1, 1}))
    Fail(origin, "layers",
         "the last layer must output " + std::to_string(spec.classes) +
             " values (classes), it outputs " + std::to_string(s.elements()));
  return shapes;
}

}  // namespace dlh
