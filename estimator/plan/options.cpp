// DLH planning core — parsing of plugstack.conf arguments and --dlh-auto values (see
// options.hpp). Pure: no Slurm, no files, no environment.
#include "estimator/plan/options.hpp"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/count_limits.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"

namespace dlh::plan {

namespace {

const char* const kAutoKeys =
    "deadline, spec, profile, data, samples, eval-samples, epochs, objective, max-gpus, types, "
    "mixed, per-gpu-batch, lr, dry-run";
const char* const kPluginKeys =
    "cluster, margin, max-gpus, default-deadline, startup; or the word register-only";

[[noreturn]] void Bad(const std::string& where, const std::string& what) {
  throw UsageError(where + ": " + what);
}

// A whole positive decimal integer without sign or spaces, at most `max`.
int64_t PositiveInt(const std::string& where, const std::string& text, int64_t max) {
  bool digits = !text.empty();
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  errno = 0;
  const long long v = digits ? std::strtoll(text.c_str(), nullptr, 10) : 0;
  if (!digits || errno == ERANGE || v <= 0 || v > max)
    Bad(where, "must be a positive integer" +
                   (max < INT64_MAX ? " up to " + std::to_string(max) : std::string()) + ", got '" +
                   text + "'");
  return v;
}

// A finite decimal number (no hex, no inf/nan), the whole text.
double Number(const std::string& where, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  bool plain = !text.empty();
  for (char c : text)
    plain = plain && (std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                      c == '+' || c == 'e' || c == 'E');
  if (!plain || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(v))
    Bad(where, "must be a number, got '" + text + "'");
  return v;
}

bool Flag(const std::string& where, const std::optional<std::string>& value) {
  if (!value) return true;
  const std::string& v = *value;
  if (v == "1" || v == "yes" || v == "y" || v == "true") return true;
  if (v == "0" || v == "no" || v == "n" || v == "false") return false;
  Bad(where, "is a flag: give it alone or as =yes/=no, got '" + v + "'");
}

bool ValidName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

// Splits on any of `seps`, keeping empty pieces.
std::vector<std::string> Split(const std::string& text, const char* seps) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (std::string(seps).find(c) != std::string::npos) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

bool IsNoArgument(const char* value) {
  return value == nullptr || value[0] == '\0' || std::string(value) == "(null)";
}

PluginConfig ParsePluginArgs(const std::vector<std::string>& args) {
  const std::string where = "plugstack.conf";
  PluginConfig c;
  std::set<std::string> seen;
  for (const std::string& arg : args) {
    if (arg == "register-only") {
      if (!seen.insert(arg).second) Bad(where + ": register-only", "given twice");
      c.register_only = true;
      continue;
    }
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0)
      Bad(where, "'" + arg + "': expected key=value (keys: " + kPluginKeys + ")");
    const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    const std::string at = where + ": " + key;
    if (!seen.insert(key).second) Bad(at, "given twice");
    if (key == "cluster") {
      if (value.empty() || value[0] != '/')
        Bad(at, "must be an absolute path, got '" + value + "'");
      c.cluster = value;
    } else if (key == "margin") {
      c.margin = Number(at, value);
      if (!(c.margin >= 0 && c.margin < 10)) Bad(at, "must be in [0, 10), got '" + value + "'");
    } else if (key == "max-gpus") {
      c.max_gpus = int(PositiveInt(at, value, kMaxGpus));
    } else if (key == "default-deadline") {
      c.default_deadline_s = ParseDuration(value, at);
      c.default_deadline = value;
    } else if (key == "startup") {
      c.startup_s = Number(at, value);
      if (!(c.startup_s >= 0 && c.startup_s <= 86400))
        Bad(at, "must be seconds in [0, 86400], got '" + value + "'");
    } else {
      Bad(where, "unknown argument '" + arg + "' (keys: " + kPluginKeys + ")");
    }
  }
  if (c.cluster.empty() && !c.register_only)
    Bad(where, "cluster=FILE is required (the cluster description, absolute path)");
  return c;
}

AutoOptions ParseAutoValue(const char* value) {
  AutoOptions o;
  o.requested = true;
  if (IsNoArgument(value)) return o;
  const std::string where = "--dlh-auto";
  std::set<std::string> seen;
  for (const std::string& item : Split(value, ",")) {
    if (item.empty()) continue;  // "a=1,,b=2" or a trailing ','
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    std::optional<std::string> val;
    if (eq != std::string::npos) val = item.substr(eq + 1);
    const std::string at = where + ": " + key;
    auto need = [&](const char* form) -> const std::string& {
      if (!val || val->empty()) Bad(at, std::string("needs a value (") + form + ")");
      return *val;
    };
    if (key != "deadline" && key != "spec" && key != "profile" && key != "data" &&
        key != "samples" && key != "eval-samples" && key != "epochs" && key != "objective" &&
        key != "max-gpus" && key != "types" && key != "mixed" && key != "per-gpu-batch" &&
        key != "lr" && key != "dry-run")
      Bad(where, "unknown key '" + key + "' (keys: " + kAutoKeys + ")");
    if (!seen.insert(key).second) Bad(at, "given twice");
    if (key == "deadline") {
      const std::string& v = need("deadline=3h");
      o.deadline_s = ParseDuration(v, at);
      o.deadline = v;
    } else if (key == "spec") {
      o.spec = need("spec=FILE");
    } else if (key == "profile") {
      o.profile = need("profile=FILE");
    } else if (key == "data") {
      o.data = need("data=FILE");
    } else if (key == "samples") {
      o.samples = PositiveInt(at, need("samples=N"), kMaxSamplesPerEpoch);
    } else if (key == "eval-samples") {
      const std::string& v = need("eval-samples=N");
      o.eval_samples = v == "0" ? 0 : PositiveInt(at, v, kMaxSamplesPerEpoch);
    } else if (key == "epochs") {
      o.epochs = int(PositiveInt(at, need("epochs=N"), kMaxEpochs));
    } else if (key == "objective") {
      const std::string& v = need("objective=energy|time|gpu-hours");
      if (v != "energy" && v != "time" && v != "gpu-hours")
        Bad(at, "must be energy, time or gpu-hours, got '" + v + "'");
      o.objective = v;
    } else if (key == "max-gpus") {
      o.max_gpus = int(PositiveInt(at, need("max-gpus=N"), kMaxGpus));
    } else if (key == "types") {
      const std::string& v = need("types=a100:h100");
      std::vector<std::string> types;
      for (const std::string& t : Split(v, ":+")) {
        if (!ValidName(t))
          Bad(at,
              "expected GPU types separated by ':' or '+' (letters, digits, '-', '_', '.'), "
              "got '" +
                  v + "'");
        types.push_back(t);
      }
      o.types = types;
    } else if (key == "mixed") {
      o.mixed = Flag(at, val);
    } else if (key == "per-gpu-batch") {
      o.per_gpu_batch = PositiveInt(at, need("per-gpu-batch=B"), 1 << 30);
    } else if (key == "lr") {
      const std::string& v = need("lr=find|linear");
      if (v != "find" && v != "linear") Bad(at, "must be find or linear, got '" + v + "'");
      o.lr = v;
    } else {  // dry-run
      o.dry_run = Flag(at, val);
    }
  }
  return o;
}

void MergeAutoOptions(AutoOptions& into, const AutoOptions& later) {
  into.requested = into.requested || later.requested;
  if (later.deadline) {
    into.deadline = later.deadline;
    into.deadline_s = later.deadline_s;
  }
  if (later.spec || later.profile) {
    into.spec = later.spec;
    into.profile = later.profile;
  }
  if (later.data) into.data = later.data;
  if (later.samples) into.samples = later.samples;
  if (later.eval_samples) into.eval_samples = later.eval_samples;
  if (later.epochs) into.epochs = later.epochs;
  if (later.objective) into.objective = later.objective;
  if (later.max_gpus) into.max_gpus = later.max_gpus;
  if (later.types) into.types = later.types;
  if (later.mixed) into.mixed = later.mixed;
  if (later.per_gpu_batch) into.per_gpu_batch = later.per_gpu_batch;
  if (later.lr) into.lr = later.lr;
  if (later.dry_run) into.dry_run = later.dry_run;
}

void ApplyAutoValue(AutoOptions& into, const char* value) {
  MergeAutoOptions(into, ParseAutoValue(value));
}

}  // namespace dlh::plan
