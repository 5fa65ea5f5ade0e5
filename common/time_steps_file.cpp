// DLH — the files of `dlh-launch time-steps` (see time_steps_file.hpp).
#include "common/time_steps_file.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>

#include "common/error.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "common/spec_json.hpp"

namespace dlh {
namespace {

using json = nlohmann::json;

constexpr const char* kRequestFormat = "dlh-time-steps-request";
constexpr const char* kResultFormat = "dlh-time-steps-result";
constexpr int kVersion = 1;
// A full GPU sweep with its specs is about 1 MiB; far more is not a request.
constexpr size_t kMaxFileBytes = 64u << 20;
constexpr const char* kNoDataset = "none (dlh-launch time-steps times random data)";

// Reads and parses `path`; `fail(field, message)` throws the caller's error type.
template <typename Fail>
json ReadJsonFile(const std::string& path, const char* format, Fail fail) {
  std::string text, why;
  if (!ReadFileText(path, kMaxFileBytes, &text, &why)) fail("", "cannot read: " + why);
  json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem)) fail(problem.path, problem.message);
  if (!j.is_object()) fail("", "must be a JSON object, got " + ShownJsonValue(j));
  const auto f = j.find("format");
  if (f == j.end() || !f->is_string() || f->get<std::string>() != format)
    fail("format", std::string("must be \"") + format + "\", got " +
                       (f == j.end() ? std::string("nothing") : ShownJsonValue(*f)));
  const auto v = j.find("version");
  if (v == j.end() || !v->is_number_integer() || v->get<int64_t>() != kVersion)
    fail("version", "must be " + std::to_string(kVersion) + ", got " +
                        (v == j.end() ? std::string("nothing") : ShownJsonValue(*v)));
  return j;
}

std::string Where(const std::string& path, const std::string& field) {
  return field.empty() ? path : path + ": " + field;
}

// A sample's "layers" (time_steps_file.hpp), each field checked; `at` names the array.
template <typename Fail>
std::vector<LayerPassTime> ReadLayerPasses(const json& list, const std::string& at, Fail fail) {
  if (!list.is_array()) fail(at, "must be an array, got " + ShownJsonValue(list));
  std::vector<LayerPassTime> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string here = at + "[" + std::to_string(i) + "]";
    const json& p = list[i];
    if (!p.is_object()) fail(here, "must be an object, got " + ShownJsonValue(p));
    auto get = [&](const char* key) -> const json& {
      const auto it = p.find(key);
      if (it == p.end()) fail(here + "." + key, "required");
      return *it;
    };
    LayerPassTime t;
    const json& layer = get("layer");
    if (!layer.is_number_integer() || layer.get<int64_t>() < -1 || layer.get<int64_t>() > 1000000)
      fail(here + ".layer", "must be a layer index or -1, got " + ShownJsonValue(layer));
    t.layer = int(layer.get<int64_t>());
    auto text = [&](const char* key, bool nullable, std::string* value) {
      const json& v = get(key);
      if (nullable && v.is_null()) return;
      if (!v.is_string() || v.get<std::string>().empty())
        fail(here + "." + key, std::string("must be a non-empty string") +
                                   (nullable ? " or null" : "") + ", got " + ShownJsonValue(v));
      *value = v.get<std::string>();
    };
    text("kind", false, &t.kind);
    text("pass", false, &t.pass);
    static const char* const kPasses[] = {"forward",       "backward", "backward-weights",
                                          "backward-data", "loss",     "update"};
    if (std::find(std::begin(kPasses), std::end(kPasses), t.pass) == std::end(kPasses))
      fail(here + ".pass",
           "must be forward, backward, backward-weights, backward-data, loss or update, got " +
               ShownJsonValue(get("pass")));
    if ((t.layer < 0) != (t.pass == "loss" || t.pass == "update"))
      fail(here + ".layer", "must be -1 for the loss and the update only, got " +
                                std::to_string(t.layer) + " for " + t.pass);
    auto seconds = [&](const char* key, double* value) {
      const json& v = get(key);
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
        fail(here + "." + key, "must be a number of seconds, 0 or more, got " + ShownJsonValue(v));
      *value = v.get<double>();
    };
    seconds("device_s", &t.device_s);
    seconds("host_s", &t.host_s);
    text("algorithm", true, &t.algorithm);
    text("math", true, &t.math);
    const json& workspace = get("workspace_bytes");
    if (!workspace.is_number_integer() || workspace.get<int64_t>() < 0)
      fail(here + ".workspace_bytes",
           "must be a whole number of bytes, 0 or more, got " + ShownJsonValue(workspace));
    t.workspace_bytes = workspace.get<int64_t>();
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::string TimeStepsRequestText(const std::vector<TimeStepsEntry>& entries) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const TimeStepsEntry& e : entries)
    list.push_back({{"batch", e.batch}, {"spec", SpecToJson(e.spec, kNoDataset)}});
  const nlohmann::ordered_json j = {
      {"format", kRequestFormat}, {"version", kVersion}, {"entries", list}};
  return j.dump(1) + "\n";
}

std::vector<TimeStepsEntry> ReadTimeStepsRequest(const std::string& path) {
  auto fail = [&](const std::string& field, const std::string& message) {
    throw SpecError(Where(path, field) + ": " + message);
  };
  const json j = ReadJsonFile(path, kRequestFormat, fail);
  const auto list = j.find("entries");
  if (list == j.end() || !list->is_array())
    fail("entries", "must be an array, got " +
                        (list == j.end() ? std::string("nothing") : ShownJsonValue(*list)));
  std::vector<TimeStepsEntry> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string at = "entries[" + std::to_string(i) + "]";
    const json& e = (*list)[i];
    if (!e.is_object()) fail(at, "must be an object, got " + ShownJsonValue(e));
    TimeStepsEntry entry;
    const auto batch = e.find("batch");
    if (batch == e.end() || !batch->is_number_integer() || batch->get<int64_t>() < 0 ||
        batch->get<int64_t>() > (int64_t(1) << 30))
      fail(at + ".batch", "must be an integer in [0, 2^30], got " +
                              (batch == e.end() ? std::string("nothing") : ShownJsonValue(*batch)));
    entry.batch = batch->get<int64_t>();
    const auto spec = e.find("spec");
    if (spec == e.end() || !spec->is_object())
      fail(at + ".spec", "must be a spec object, got " +
                             (spec == e.end() ? std::string("nothing") : ShownJsonValue(*spec)));
    // ParseSpec names the field after its origin: "<path>: entries[3].spec: layers[2]...".
    entry.spec = ParseSpec(spec->dump(), Where(path, at + ".spec"), "");
    out.push_back(std::move(entry));
  }
  return out;
}

std::string TimeStepsResultText(const TimeStepsResult& r) {
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  auto text_or_null = [](const std::string& t) { return t.empty() ? json(nullptr) : json(t); };
  for (const TimeStepsSample& s : r.samples) {
    nlohmann::ordered_json sample = {{"model", s.model},
                                     {"batch", s.batch},
                                     {"seconds", s.seconds >= 0 ? json(s.seconds) : json(nullptr)},
                                     {"joules", s.joules >= 0 ? json(s.joules) : json(nullptr)},
                                     {"error", text_or_null(s.error)}};
    if (!s.layers.empty()) {
      nlohmann::ordered_json layers = nlohmann::ordered_json::array();
      for (const LayerPassTime& p : s.layers)
        layers.push_back({{"layer", p.layer},
                          {"kind", p.kind},
                          {"pass", p.pass},
                          {"device_s", p.device_s},
                          {"host_s", p.host_s},
                          {"algorithm", text_or_null(p.algorithm)},
                          {"math", text_or_null(p.math)},
                          {"workspace_bytes", p.workspace_bytes}});
      sample["layers"] = layers;
      if (!s.layers_held) sample["layers_held"] = false;
    }
    samples.push_back(sample);
  }
  const nlohmann::ordered_json j = {{"format", kResultFormat}, {"version", kVersion},
                                    {"complete", r.complete},  {"device", r.device},
                                    {"options", r.options},    {"samples", samples}};
  return j.dump(1) + "\n";
}

TimeStepsResult ReadTimeStepsResult(const std::string& path) {
  auto fail = [&](const std::string& field, const std::string& message) {
    throw EstimateError(Where(path, field) + ": " + message);
  };
  const json j = ReadJsonFile(path, kResultFormat, fail);
  auto get = [&](const json& o, const std::string& at, const char* key) -> const json& {
    const auto it = o.find(key);
    if (it == o.end()) fail(at.empty() ? key : at + "." + key, "required");
    return *it;
  };
  TimeStepsResult r;
  const json& complete = get(j, "", "complete");
  if (!complete.is_boolean())
    fail("complete", "must be true or false, got " + ShownJsonValue(complete));
  r.complete = complete.get<bool>();
  r.device = get(j, "", "device");
  if (!r.device.is_object()) fail("device", "must be an object, got " + ShownJsonValue(r.device));
  r.options = get(j, "", "options");
  if (!r.options.is_object())
    fail("options", "must be an object, got " + ShownJsonValue(r.options));
  const json& list = get(j, "", "samples");
  if (!list.is_array()) fail("samples", "must be an array, got " + ShownJsonValue(list));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = "samples[" + std::to_string(i) + "]";
    const json& s = list[i];
    if (!s.is_object()) fail(at, "must be an object, got " + ShownJsonValue(s));
    TimeStepsSample out;
    const json& model = get(s, at, "model");
    if (!model.is_string() || model.get<std::string>().empty())
      fail(at + ".model", "must be a non-empty string, got " + ShownJsonValue(model));
    out.model = model.get<std::string>();
    const json& batch = get(s, at, "batch");
    if (!batch.is_number_integer() || batch.get<int64_t>() <= 0)
      fail(at + ".batch", "must be a positive integer, got " + ShownJsonValue(batch));
    out.batch = batch.get<int64_t>();
    // seconds and joules: a positive number, or null (failed / not measured).
    auto number = [&](const char* key, double* value) {
      const json& v = get(s, at, key);
      if (v.is_null()) return;
      if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
        fail(at + "." + key, "must be a positive number or null, got " + ShownJsonValue(v));
      *value = v.get<double>();
    };
    number("seconds", &out.seconds);
    number("joules", &out.joules);
    const json& error = get(s, at, "error");
    if (!error.is_null() && !error.is_string())
      fail(at + ".error", "must be a string or null, got " + ShownJsonValue(error));
    if (error.is_string()) out.error = error.get<std::string>();
    if (out.seconds < 0 && out.error.empty())
      fail(at + ".seconds", "null without an \"error\" saying why");
    if (const auto layers = s.find("layers"); layers != s.end())
      out.layers = ReadLayerPasses(*layers, at + ".layers", fail);
    if (const auto held = s.find("layers_held"); held != s.end()) {
      if (!held->is_boolean())
        fail(at + ".layers_held", "must be true or false, got " + ShownJsonValue(*held));
      out.layers_held = held->get<bool>();
    }
    r.samples.push_back(std::move(out));
  }
  return r;
}

}  // namespace dlh
