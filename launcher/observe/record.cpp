// DLH — an observation record and its JSON (see record.hpp).
#include "launcher/observe/record.hpp"

#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/json_parse.hpp"

namespace dlh {
namespace {

using nlohmann::json;

json OrNull(double v) { return v >= 0 ? json(v) : json(nullptr); }

// One object of the record being read; messages are "<origin>: <path>.<key>: <problem>".
class Fields {
 public:
  Fields(const json& j, const std::string& origin, std::string path)
      : j_(j), origin_(origin), path_(std::move(path)) {
    if (!j_.is_object()) fail("", "must be an object, got " + ShownJsonValue(j_));
  }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    const std::string at = key.empty() ? path_ : path_.empty() ? key : path_ + "." + key;
    throw RecordError(origin_ + ": " + (at.empty() ? "" : at + ": ") + problem);
  }
  const json& required(const char* key) const {
    if (!j_.contains(key)) fail(key, "missing");
    return j_.at(key);
  }
  Fields object(const char* key) const {
    return Fields(required(key), origin_, path_.empty() ? key : path_ + "." + key);
  }
  std::string text(const char* key, bool required_field, bool nonempty = false) const {
    if (!j_.contains(key)) {
      if (required_field) fail(key, "missing");
      return "";
    }
    const json& v = j_.at(key);
    if (!v.is_string() || (nonempty && v.get<std::string>().empty()))
      fail(key, std::string(nonempty ? "must be a non-empty string" : "must be a string") +
                    ", got " + ShownJsonValue(v));
    return v.get<std::string>();
  }
  // An integer in [min, max]; absent: `dflt` unless required.
  int64_t integer(const char* key, int64_t min, int64_t max, bool required_field,
                  int64_t dflt = 0) const {
    if (!j_.contains(key)) {
      if (required_field) fail(key, "missing");
      return dflt;
    }
    const json& v = j_.at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) ||
        v.get<int64_t>() < min || v.get<int64_t>() > max)
      fail(key, "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                    "], got " + ShownJsonValue(v));
    return v.get<int64_t>();
  }
  // A finite number > 0 (positive) or >= 0; null or absent: `dflt` unless required.
  double number(const char* key, bool positive, bool required_field, double dflt = 0) const {
    if (!j_.contains(key) || j_.at(key).is_null()) {
      if (required_field) fail(key, "missing");
      return dflt;
    }
    const json& v = j_.at(key);
    const char* want = positive ? "must be a positive number" : "must be a non-negative number";
    if (!v.is_number()) fail(key, std::string(want) + ", got " + ShownJsonValue(v));
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < 0 || (positive && x == 0))
      fail(key, std::string(want) + ", got " + ShownJsonValue(v));
    return x;
  }
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& j() const { return j_; }

 private:
  const json& j_;
  const std::string& origin_;
  std::string path_;
};

bool IsHex16(const std::string& s) {
  if (s.size() != 16) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

std::string ModelKey(const std::string& canonical) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits: offset basis, prime below
  for (unsigned char c : canonical) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

std::string RecordTimeNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json ObservationToJson(const Observation& o) {
  json j;
  j["dlh_observation"] = kObservationVersion;
  j["created"] = o.created;
  j["user"] = o.user;
  j["command"] = o.command;
  j["model"] = {
      {"key", o.model_key}, {"name", o.model_name}, {"features", o.features}, {"spec", o.spec}};
  j["where"] = {{"gpu_type", o.gpu_type},
                {"device", o.device},
                {"probe", o.probe},
                {"ranks", o.ranks},
                {"threads_per_rank", o.threads_per_rank},
                {"ranks_per_node", o.ranks_per_node},
                {"gpus_per_node", o.gpus_per_node},
                {"hosts", o.hosts}};
  j["batch"] = {{"global", o.global_batch}, {"per_rank", o.per_rank_batch}};
  j["measured"] = {{"step_s", o.step_s},
                   {"steps", o.steps},
                   {"steps_s", OrNull(o.steps_s)},
                   {"later_steps", o.later_steps},
                   {"later_steps_s", OrNull(o.later_steps_s)},
                   {"allreduce_s", OrNull(o.allreduce_s)},
                   {"startup_s", OrNull(o.startup_s)},
                   {"eval_s", o.eval_s},
                   {"evaluations", o.evaluations},
                   {"first_eval_s", OrNull(o.first_eval_s)},
                   {"checkpoint_s", o.checkpoint_s},
                   {"checkpoints", o.checkpoints},
                   {"total_s", o.total_s},
                   {"whole_job", o.whole_job},
                   {"energy_j", OrNull(o.energy_j)}};
  if (o.has_prediction)
    j["predicted"] = {{"step_s", o.predicted_step_s},
                      {"compute_s", o.predicted_compute_s},
                      {"comm_s", o.predicted_comm_s},
                      {"total_s", o.predicted_total_s}};
  else
    j["predicted"] = nullptr;
  return j;
}

Observation ObservationFromJson(const json& j, const std::string& origin) {
  const Fields top(j, origin, "");
  const json& tag = top.required("dlh_observation");
  if (!tag.is_number_integer() || tag.get<int64_t>() != kObservationVersion)
    top.fail("dlh_observation", "must be " + std::to_string(kObservationVersion) +
                                    " (a record of another version or program), got " +
                                    ShownJsonValue(tag));
  Observation o;
  o.created = top.text("created", true, true);
  o.user = top.text("user", false);
  o.command = top.text("command", false);
  const Fields model = top.object("model");
  o.model_key = model.text("key", true);
  if (!IsHex16(o.model_key))
    model.fail("key", "must be 16 lower-case hex digits, got " + ShownJsonValue(o.model_key));
  o.model_name = model.text("name", false);
  if (model.has("features")) {
    if (!model.j().at("features").is_object())
      model.fail("features",
                 "must be an object or null, got " + ShownJsonValue(model.j().at("features")));
    o.features = model.j().at("features");
  }
  if (model.has("spec")) {
    if (!model.j().at("spec").is_object())
      model.fail("spec", "must be an object or null, got " + ShownJsonValue(model.j().at("spec")));
    o.spec = model.j().at("spec");
  }
  const Fields where = top.object("where");
  o.gpu_type = where.text("gpu_type", false);
  o.device = where.text("device", true, true);
  if (where.has("probe")) o.probe = where.j().at("probe");
  constexpr int64_t kMaxRanks = int64_t(1) << 24;
  o.ranks = int(where.integer("ranks", 1, kMaxRanks, true));
  o.threads_per_rank = int(where.integer("threads_per_rank", 0, 1 << 16, false));
  o.ranks_per_node = int(where.integer("ranks_per_node", 1, kMaxRanks, false, 1));
  o.gpus_per_node = int(where.integer("gpus_per_node", 0, 1 << 16, false));
  if (where.j().contains("hosts")) {
    const json& hosts = where.j().at("hosts");
    if (!hosts.is_array()) where.fail("hosts", "must be an array of names");
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (!hosts[i].is_string())
        where.fail("hosts[" + std::to_string(i) + "]",
                   "must be a string, got " + ShownJsonValue(hosts[i]));
      o.hosts.push_back(hosts[i].get<std::string>());
    }
  }
  const Fields batch = top.object("batch");
  constexpr int64_t kMaxBatch = int64_t(1) << 40;
  o.per_rank_batch = batch.integer("per_rank", 1, kMaxBatch, true);
  o.global_batch = batch.integer("global", 0, kMaxBatch, false);
  const Fields m = top.object("measured");
  o.step_s = m.number("step_s", true, true);
  o.steps = m.integer("steps", 0, INT64_MAX, false);
  o.steps_s = m.number("steps_s", false, false, -1);
  o.startup_s = m.number("startup_s", false, false, -1);
  o.eval_s = m.number("eval_s", false, false);
  o.evaluations = m.integer("evaluations", 0, INT64_MAX, false);
  o.later_steps = m.integer("later_steps", 0, o.steps, false);
  o.later_steps_s = m.number("later_steps_s", false, false, -1);
  // A part no larger than its whole (a millionth of rounding allowed).
  if (o.later_steps_s > 0 && o.steps_s > 0 && o.later_steps_s > o.steps_s * (1 + 1e-6))
    m.fail("later_steps_s", "must be at most steps_s (" + ShownJsonValue(json(o.steps_s)) +
                                "), got " + ShownJsonValue(m.j().at("later_steps_s")));
  o.allreduce_s = m.number("allreduce_s", false, false, -1);
  if (o.allreduce_s > 0 && o.steps_s > 0 && o.steps > 0 &&
      o.allreduce_s > o.steps_s / double(o.steps) * (1 + 1e-3))
    m.fail("allreduce_s", "must be at most the mean step (steps_s / steps, " +
                              ShownJsonValue(json(o.steps_s / double(o.steps))) + "), got " +
                              ShownJsonValue(m.j().at("allreduce_s")));
  o.first_eval_s = m.number("first_eval_s", false, false, -1);
  if (o.first_eval_s >= 0 && (o.evaluations == 0 || o.first_eval_s > o.eval_s * (1 + 1e-6)))
    m.fail("first_eval_s", "must be at most eval_s (" + ShownJsonValue(json(o.eval_s)) +
                               ") of at least one evaluation, got " +
                               ShownJsonValue(m.j().at("first_eval_s")));
  o.checkpoint_s = m.number("checkpoint_s", false, false);
  o.checkpoints = m.integer("checkpoints", 0, INT64_MAX, false);
  o.total_s = m.number("total_s", false, true);
  if (m.j().contains("whole_job")) {
    if (!m.j().at("whole_job").is_boolean())
      m.fail("whole_job", "must be true or false, got " + ShownJsonValue(m.j().at("whole_job")));
    o.whole_job = m.j().at("whole_job").get<bool>();
  }
  o.energy_j = m.number("energy_j", false, false, -1);
  if (top.has("predicted")) {
    const Fields p = top.object("predicted");
    o.has_prediction = true;
    o.predicted_step_s = p.number("step_s", true, true);
    o.predicted_compute_s = p.number("compute_s", false, false);
    o.predicted_comm_s = p.number("comm_s", false, false);
    o.predicted_total_s = p.number("total_s", false, false);
  }
  return o;
}

}  // namespace dlh
