// DLH — the profile of a user's program: JSON in and out, loading, merging (see
// program_profile.hpp).
#include "common/program_profile.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <map>

#include "common/error.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "common/median.hpp"

namespace dlh {

using nlohmann::json;

namespace {

constexpr size_t kMaxProfileBytes =
    1u << 20;  // a profile is a few hundred bytes (with a probe, a set of them a few KB)
// As dlh-launch run reads the program's lines (launcher/run/progress.cpp) and the plugin
// its epochs=: larger counts are mistakes.
constexpr int64_t kMaxCount = 1000000;

std::string Quote(const std::string& s) {
  return json(s).dump(-1, ' ', true, json::error_handler_t::replace);
}

// "<origin>: <path>: <problem>", or "<origin>: <problem>" for the whole file; one line.
[[noreturn]] void Throw(const std::string& origin, const std::string& path,
                        const std::string& problem) {
  std::string msg = (origin.empty() ? std::string("profile") : origin) + ": ";
  if (!path.empty()) msg += path + ": ";
  msg += problem;
  for (char& c : msg)
    if (c == '\n' || c == '\r') c = ' ';
  throw UsageError(msg);
}

// Reads the fields of one JSON object, failing with the field's full path.
class Fields {
 public:
  Fields(const json& j, const std::string& origin, std::string path)
      : j_(j), origin_(origin), path_(std::move(path)) {
    if (!j_.is_object()) Throw(origin_, path_, "must be a JSON object, got " + ShownJsonValue(j_));
  }

  std::string at(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    Throw(origin_, key.empty() ? path_ : at(key), problem);
  }
  bool has(const char* key) const { return j_.contains(key); }
  const json& get(const char* key) const { return j_.at(key); }

  void only(std::initializer_list<const char*> allowed) const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (const char* a : allowed) known = known || it.key() == a;
      if (!known) fail("", "unknown key " + Quote(it.key()));
    }
  }

  // An integer in [min, max] (min 0 or 1); floats, 3.0 included, are refused. Absent and
  // not `required`: `def`.
  int64_t integer(const char* key, int64_t min, int64_t max, bool required, int64_t def) const {
    if (!has(key)) {
      if (required) fail(key, "required");
      return def;
    }
    const json& v = get(key);
    const std::string want =
        min >= 1 ? "must be a positive integer" : "must be a non-negative integer";
    if (!v.is_number_integer()) fail(key, want + ", got " + ShownJsonValue(v));
    // nlohmann keeps a non-negative integer as unsigned, which may exceed int64_t.
    const std::string most =
        "must be at most " + std::to_string(max) + ", got " + ShownJsonValue(v);
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(max)) fail(key, most);
    const int64_t x = v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
    if (x < min) fail(key, want + ", got " + ShownJsonValue(v));
    if (x > max) fail(key, most);
    return x;
  }

  // A finite number, > 0 (`positive`) or >= 0.
  double number(const char* key, bool positive, bool required) const {
    if (!has(key)) {
      if (required) fail(key, "required");
      return 0;
    }
    const json& v = get(key);
    const char* want = positive ? "must be a positive number" : "must be a non-negative number";
    if (!v.is_number()) fail(key, std::string(want) + ", got " + ShownJsonValue(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || (positive ? !(d > 0) : !(d >= 0)))
      fail(key, std::string(want) + ", got " + ShownJsonValue(v));
    return d;
  }

  std::string text(const char* key) const {
    if (!has(key)) return "";
    const json& v = get(key);
    if (!v.is_string()) fail(key, "must be a string, got " + ShownJsonValue(v));
    return v.get<std::string>();
  }

 private:
  const json& j_;
  const std::string& origin_;
  std::string path_;
};

// `later` timed again the batch `earlier` holds: one point of both runs' rounds.
ProfilePoint JoinRounds(const ProfilePoint& earlier, const ProfilePoint& later) {
  ProfilePoint j = earlier;
  if (j.rounds.empty()) j.rounds = {earlier.step_s};
  if (later.rounds.empty())
    j.rounds.push_back(later.step_s);
  else
    j.rounds.insert(j.rounds.end(), later.rounds.begin(), later.rounds.end());
  j.step_s = Median(j.rounds);
  j.steps = int(std::min<int64_t>(int64_t(earlier.steps) + later.steps, kMaxCount));
  // The extremes of the steps of both (0, not given, on a side leaves the other's); the
  // median of the rounds lies between them, as each round's mean lay between its own.
  const double lo = earlier.step_s_min > 0 && later.step_s_min > 0
                        ? std::min(earlier.step_s_min, later.step_s_min)
                        : std::max(earlier.step_s_min, later.step_s_min);
  j.step_s_min = std::min(lo, j.step_s);
  j.step_s_max = std::max(earlier.step_s_max, later.step_s_max);
  if (j.step_s_max > 0) j.step_s_max = std::max(j.step_s_max, j.step_s);
  return j;
}

ProfilePoint ParsePoint(const json& j, const std::string& origin, const std::string& path) {
  Fields f(j, origin, path);
  f.only({"batch", "step_s", "step_s_min", "step_s_max", "steps", "rounds"});
  ProfilePoint p;
  // The batch becomes the spec's int global batch when the profile gives none.
  p.batch = f.integer("batch", 1, INT_MAX, true, 0);
  p.step_s = f.number("step_s", true, true);
  p.step_s_min = f.number("step_s_min", false, false);
  p.step_s_max = f.number("step_s_max", false, false);
  // A step of more than a day is no step a job is planned from, and 1e308 s planned into
  // infinite times and a NaN energy instead of a line naming the field (2026-12-07).
  for (const char* key : {"step_s", "step_s_min", "step_s_max"})
    if (f.has(key) && f.get(key).is_number() && f.get(key).get<double>() > kMaxProfileStepS)
      f.fail(key, "must be at most " + json(kMaxProfileStepS).dump() +
                      " seconds (a day a step), got " + ShownJsonValue(f.get(key)));
  p.steps = int(f.integer("steps", 1, kMaxCount, true, 0));
  if (f.has("rounds")) {
    const json& list = f.get("rounds");
    if (!list.is_array() || list.size() < 2 || list.size() > size_t(p.steps))
      f.fail("rounds", "must be an array of 2 to steps (" + std::to_string(p.steps) +
                           ") step times, one a run, got " + ShownJsonValue(list));
    for (size_t i = 0; i < list.size(); ++i) {
      const json& v = list[i];
      const double d = v.is_number() ? v.get<double>() : 0;
      if (!(std::isfinite(d) && d > 0 && d <= kMaxProfileStepS))
        Throw(origin, f.at("rounds") + "[" + std::to_string(i) + "]",
              "must be a positive number of seconds up to a day, got " + ShownJsonValue(v));
      p.rounds.push_back(d);
    }
    // step_s is what the planner reads: it must be the rounds' median, not a stale value.
    const double median = Median(p.rounds);
    if (std::fabs(p.step_s - median) > 1e-9 * median)
      f.fail("step_s", "must be the median of rounds (" + json(median).dump() + "), got " +
                           json(p.step_s).dump());
  }
  // The step time lies between the extremes; a file that says otherwise was edited wrongly.
  if (p.step_s_min > p.step_s)
    f.fail("step_s_min", "must not exceed step_s (" + json(p.step_s).dump() + "), got " +
                             json(p.step_s_min).dump());
  if (p.step_s_max > 0 && p.step_s_max < p.step_s)
    f.fail("step_s_max", "must not be below step_s (" + json(p.step_s).dump() + "), got " +
                             json(p.step_s_max).dump());
  return p;
}

}  // namespace

json ProgramProfileToJson(const ProgramProfile& p) {
  json points = json::array();
  for (const ProfilePoint& q : p.points) {
    points.push_back({{"batch", q.batch},
                      {"step_s", q.step_s},
                      {"step_s_min", q.step_s_min},
                      {"step_s_max", q.step_s_max},
                      {"steps", q.steps}});
    if (!q.rounds.empty()) points.back()["rounds"] = q.rounds;
  }
  json j = {{"dlh_profile", kProgramProfileVersion},
            {"program", p.program},
            {"command", p.command},
            {"created", p.created},
            {"host", p.host},
            {"gpu_type", p.gpu_type},
            {"device", p.device},
            {"cpu_threads", p.cpu_threads},
            {"threads_offered", p.threads_offered},
            {"params", p.params},
            {"samples", p.samples},
            {"epochs", p.epochs},
            {"global_batch", p.global_batch},
            {"lr", p.lr},
            {"optimizer_slots", p.optimizer_slots},
            {"memory_bytes", p.memory_bytes},
            {"points", points}};
  if (!p.probe.is_null()) j["probe"] = p.probe;
  return j;
}

namespace {

// A profile at `prefix` ("" for a file of its own, "profiles[1]" in a set).
ProgramProfile ProfileAt(const json& j, const std::string& origin, const std::string& prefix) {
  Fields f(j, origin, prefix);
  if (!f.has("dlh_profile"))
    f.fail("dlh_profile", "required (dlh-launch run --profile writes it: is this a profile?)");
  const json& version = f.get("dlh_profile");
  if (!version.is_number_integer() || version.get<int64_t>() != kProgramProfileVersion)
    f.fail("dlh_profile", "unknown format version " + ShownJsonValue(version) +
                              " (this build reads " + std::to_string(kProgramProfileVersion) + ")");
  // After the version: a file of another kind (a spec) is named as such, not by its keys.
  f.only({"dlh_profile", "program", "command", "created", "host", "gpu_type", "device",
          "cpu_threads", "threads_offered", "params", "samples", "epochs", "global_batch", "lr",
          "optimizer_slots", "memory_bytes", "probe", "points"});
  ProgramProfile p;
  p.origin = origin;
  p.program = f.text("program");
  if (f.has("command")) {
    const json& cmd = f.get("command");
    if (!cmd.is_array())
      f.fail("command", "must be an array of strings, got " + ShownJsonValue(cmd));
    for (size_t i = 0; i < cmd.size(); ++i) {
      if (!cmd[i].is_string())
        Throw(origin, f.at("command") + "[" + std::to_string(i) + "]",
              "must be a string, got " + ShownJsonValue(cmd[i]));
      p.command.push_back(cmd[i].get<std::string>());
    }
  }
  p.created = f.text("created");
  p.host = f.text("host");
  p.gpu_type = f.text("gpu_type");
  // A GPU type is a name of the cluster description (and of Slurm's GRES).
  for (unsigned char c : p.gpu_type)
    if (!(std::isalnum(c) || c == '-' || c == '_' || c == '.'))
      f.fail("gpu_type",
             "must contain only letters, digits, '-', '_' and '.', got " + Quote(p.gpu_type));
  p.device = f.text("device");
  p.cpu_threads = int(f.integer("cpu_threads", 0, kMaxCount, false, 0));
  p.threads_offered = int(f.integer("threads_offered", 0, kMaxCount, false, 0));
  p.params = f.integer("params", 0, INT64_MAX, false, 0);
  p.samples = f.integer("samples", 0, INT64_MAX, false, 0);
  p.epochs = int(f.integer("epochs", 0, kMaxCount, false, 0));
  p.global_batch = f.integer("global_batch", 0, INT_MAX, false, 0);
  p.lr = f.number("lr", false, false);
  p.optimizer_slots = int(f.integer("optimizer_slots", 0, kMaxCount, false, 1));
  p.memory_bytes = f.number("memory_bytes", false, false);
  if (f.has("probe")) {
    const json& probe = f.get("probe");
    if (!probe.is_object() && !probe.is_null())
      f.fail("probe",
             "must be a JSON object (a device probe) or null, got " + ShownJsonValue(probe));
    p.probe = probe;
  }

  if (!f.has("points")) f.fail("points", "required (the timed batches)");
  const json& list = f.get("points");
  if (!list.is_array() || list.empty())
    f.fail("points", "must be a non-empty array, got " + ShownJsonValue(list));
  std::map<int64_t, size_t> seen;  // batch -> index in the file
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = f.at("points") + "[" + std::to_string(i) + "]";
    const ProfilePoint q = ParsePoint(list[i], origin, path);
    auto [it, fresh] = seen.emplace(q.batch, i);
    if (!fresh)
      Throw(origin, path + ".batch",
            "duplicate batch " + std::to_string(q.batch) + " (points[" +
                std::to_string(it->second) + "] has it too)");
    p.points.push_back(q);
  }
  std::sort(p.points.begin(), p.points.end(),
            [](const ProfilePoint& a, const ProfilePoint& b) { return a.batch < b.batch; });
  return p;
}

}  // namespace

ProgramProfile ProgramProfileFromJson(const json& j, const std::string& origin) {
  return ProfileAt(j, origin, "");
}

json ProfileSetToJson(const std::vector<ProgramProfile>& set) {
  json profiles = json::array();
  for (const ProgramProfile& p : set) profiles.push_back(ProgramProfileToJson(p));
  return {{"dlh_profile_set", kProfileSetVersion}, {"profiles", profiles}};
}

void CheckProfileSet(const std::vector<ProgramProfile>& set, const std::string& origin,
                     const std::vector<std::string>& where) {
  auto at = [&](size_t i) {
    return i < where.size() ? where[i] : "profiles[" + std::to_string(i) + "]";
  };
  if (set.empty()) Throw(origin, "profiles", "must be a non-empty array");
  if (set.size() == 1) return;
  std::map<std::string, size_t> types;
  for (size_t i = 0; i < set.size(); ++i) {
    const ProgramProfile& p = set[i];
    // Several profiles are one per type: each must say its own.
    if (p.gpu_type.empty())
      Throw(origin, at(i) + ".gpu_type",
            "required when profiles of several GPU types are combined (dlh-launch run "
            "--gpu-type TYPE)");
    auto [it, fresh] = types.emplace(p.gpu_type, i);
    if (!fresh)
      Throw(origin, at(i) + ".gpu_type",
            "\"" + p.gpu_type + "\" is measured twice (" + at(it->second) +
                " has it too): one profile per GPU type");
    // One program: its size and name, where both profiles know them.
    const ProgramProfile& first = set[0];
    if (first.params > 0 && p.params > 0 && first.params != p.params)
      Throw(origin, at(i) + ".params",
            std::to_string(p.params) + ", " + at(0) + " has " + std::to_string(first.params) +
                ": profiles of one program only");
    if (!first.program.empty() && !p.program.empty() && first.program != p.program)
      Throw(origin, at(i) + ".program",
            Quote(p.program) + ", " + at(0) + " has " + Quote(first.program) +
                ": profiles of one program only");
  }
}

std::vector<ProgramProfile> ProfileSetFromJson(const json& j, const std::string& origin) {
  Fields f(j, origin, "");
  if (!f.has("dlh_profile_set")) f.fail("dlh_profile_set", "required (is this a profile set?)");
  const json& version = f.get("dlh_profile_set");
  if (!version.is_number_integer() || version.get<int64_t>() != kProfileSetVersion)
    f.fail("dlh_profile_set", "unknown format version " + ShownJsonValue(version) +
                                  " (this build reads " + std::to_string(kProfileSetVersion) + ")");
  f.only({"dlh_profile_set", "profiles"});
  if (!f.has("profiles")) f.fail("profiles", "required (one profile per GPU type)");
  const json& list = f.get("profiles");
  if (!list.is_array() || list.empty())
    f.fail("profiles", "must be a non-empty array, got " + ShownJsonValue(list));
  std::vector<ProgramProfile> set;
  for (size_t i = 0; i < list.size(); ++i)
    set.push_back(ProfileAt(list[i], origin, "profiles[" + std::to_string(i) + "]"));
  CheckProfileSet(set, origin);
  return set;
}

std::vector<ProgramProfile> LoadProfiles(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, kMaxProfileBytes, &text, &why)) {
    if (why.rfind("larger than", 0) == 0) why += ", not a profile";
    Throw(path, "", "cannot read: " + why);
  }
  json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem)) Throw(path, problem.path, problem.message);
  if (j.is_object() && j.contains("dlh_profile_set")) return ProfileSetFromJson(j, path);
  return {ProgramProfileFromJson(j, path)};
}

ProgramProfile LoadProgramProfile(const std::string& path) {
  std::string text, why;
  if (!ReadFileText(path, kMaxProfileBytes, &text, &why)) {
    if (why.rfind("larger than", 0) == 0) why += ", not a profile";
    Throw(path, "", "cannot read: " + why);
  }
  json j;
  JsonProblem problem;
  if (!ParseJsonStrict(text, &j, &problem)) Throw(path, problem.path, problem.message);
  return ProgramProfileFromJson(j, path);
}

ProgramProfile MergeProfiles(const ProgramProfile& base, const ProgramProfile& update,
                             bool join_rounds) {
  const std::string where = base.origin.empty() ? "profile" : base.origin;
  // Timings of two devices, or of two programs, on one line would fit neither.
  if (!base.gpu_type.empty() && !update.gpu_type.empty() && base.gpu_type != update.gpu_type)
    throw UsageError(where + ": profiled on " + base.gpu_type + ", this run is on " +
                     update.gpu_type + ": use another --profile-out");
  if (base.params > 0 && update.params > 0 && base.params != update.params)
    throw UsageError(where + ": a program of " + std::to_string(base.params) +
                     " params, this run has " + std::to_string(update.params) +
                     ": use another --profile-out");
  ProgramProfile m = base;
  auto text = [](std::string* into, const std::string& from) {
    if (!from.empty()) *into = from;
  };
  text(&m.program, update.program);
  if (!update.command.empty()) m.command = update.command;
  text(&m.created, update.created);
  text(&m.host, update.host);
  text(&m.gpu_type, update.gpu_type);
  text(&m.device, update.device);
  if (update.cpu_threads > 0) m.cpu_threads = update.cpu_threads;
  if (update.threads_offered > 0) m.threads_offered = update.threads_offered;
  if (update.params > 0) m.params = update.params;
  if (update.samples > 0) m.samples = update.samples;
  if (update.epochs > 0) m.epochs = update.epochs;
  if (update.global_batch > 0) m.global_batch = update.global_batch;
  if (update.lr > 0) m.lr = update.lr;
  // 1 is both the default and SGD with momentum: only another count says something new.
  if (update.optimizer_slots != 1) m.optimizer_slots = update.optimizer_slots;
  if (!update.probe.is_null()) m.probe = update.probe;
  for (const ProfilePoint& q : update.points) {
    auto same = std::find_if(m.points.begin(), m.points.end(),
                             [&](const ProfilePoint& o) { return o.batch == q.batch; });
    if (same != m.points.end())
      *same = join_rounds ? JoinRounds(*same, q) : q;
    else
      m.points.push_back(q);
  }
  std::sort(m.points.begin(), m.points.end(),
            [](const ProfilePoint& a, const ProfilePoint& b) { return a.batch < b.batch; });
  // memory_bytes is the peak at the largest batch: a run of a smaller batch says less about
  // it than the file does (and nothing at all when the file does not know it).
  if (update.memory_bytes > 0 && !update.points.empty() && !m.points.empty() &&
      update.points.back().batch >= m.points.back().batch)
    m.memory_bytes = update.memory_bytes;
  return m;
}

}  // namespace dlh
