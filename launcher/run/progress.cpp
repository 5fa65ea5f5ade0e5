// DLH — the progress channel of `dlh-launch run` (see progress.hpp).
#include "launcher/run/progress.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>

#include "common/error.hpp"
#include "common/median.hpp"
#include "common/one_line.hpp"

namespace dlh {
namespace {

// A program that writes without newlines must not grow the rank's memory without bound.
constexpr size_t kMaxLine = 4096;
// Batches and sample counts past this are no program's (the estimator keeps batches as int).
constexpr int64_t kMaxCount = 2147483647;

// The whole of `text` as a non-negative integer; false for anything else.
bool ReadCount(const std::string& text, int64_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') return false;
  *out = v;
  return true;
}

// The whole of `text` as a finite number ("nan", "inf" and hexadecimal refused).
bool ReadNumber(const std::string& text, double* out) {
  if (text.empty() || text.find_first_of("xXnN") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool ReadPositiveNumber(const std::string& text, double* out) {
  return ReadNumber(text, out) && *out > 0;
}

std::vector<std::string> Tokens(const std::string& line) {
  std::vector<std::string> out;
  for (size_t at = 0; at < line.size();) {
    const size_t start = line.find_first_not_of(" \t", at);
    if (start == std::string::npos) break;
    const size_t end = std::min(line.find_first_of(" \t", start), line.size());
    out.push_back(line.substr(start, end - start));
    at = end;
  }
  return out;
}

// A metric's name: what a JSON key and a chart legend take without escaping.
bool IsMetricName(const std::string& name) {
  if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name[0])))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return name != "event" && name != "t";
}

// The step line's fields and what each must be: (name, least value, greatest value, whether
// the least is allowed).
struct StepField {
  const char* name;
  double least, most;
  bool least_allowed;
  const char* need;
};
constexpr StepField kStepFields[] = {
    {"loss", -1e300, 1e300, true, "a finite number"},
    {"accuracy", 0, 1, true, "a fraction from 0 to 1"},
    {"lr", 0, 1e300, true, "a non-negative number"},
    {"samples_per_s", 0, 1e300, false, "a positive number"},
    {"data", 0, 1e300, true, "non-negative seconds"},
    {"compute", 0, 1e300, true, "non-negative seconds"},
    {"allreduce", 0, 1e300, true, "non-negative seconds"},
};

void SetValue(ProgressEvent* e, const std::string& name, double v) {
  for (auto& [n, old] : e->values)
    if (n == name) {
      old = v;
      return;
    }
  e->values.emplace_back(name, v);
}

}  // namespace

double ProgressEvent::value(const std::string& name, double fallback) const {
  for (const auto& [n, v] : values)
    if (n == name) return v;
  return fallback;
}

std::vector<std::string> ProgressLog::Fields(const std::vector<std::string>& tokens, size_t first,
                                             const std::string& quoted, ProgressEvent* e) {
  const bool step = e->kind == ProgressEvent::Kind::kStep;
  const std::string line_key = step ? "step" : "eval";
  std::vector<std::string> warnings;
  auto warn = [&](const std::string& kind, const std::string& text) {
    for (std::string& w : Warn(kind, text)) warnings.push_back(std::move(w));
  };
  for (size_t i = first; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    const size_t eq = token.find('=');
    const std::string name = token.substr(0, eq),
                      text = eq == std::string::npos ? "" : token.substr(eq + 1);
    const std::string shown = "'" + OneLine(token.substr(0, 80)) + "' in " + quoted;
    if (eq == std::string::npos || name.empty()) {
      warn(line_key + " not a field",
           "a " + line_key + " line's fields are NAME=VALUE, got " + shown + ": the field ignored");
      continue;
    }
    if (name == "epoch" || (!step && name == "step")) {
      int64_t v = 0;
      if (!ReadCount(text, &v) || v > kMaxCount)
        warn(line_key + " " + name,
             "'" + name + "' needs a non-negative integer, got " + shown + ": the field ignored");
      else
        (name == "epoch" ? e->epoch : e->step) = v;
      continue;
    }
    double v = 0;
    if (step) {
      const StepField* field = nullptr;
      for (const StepField& f : kStepFields)
        if (name == f.name) field = &f;
      if (!field) {
        warn("step unknown field", "unknown step field " + shown +
                                       " (known: loss, accuracy, lr, samples_per_s, epoch, data, "
                                       "compute, allreduce): the field ignored");
        continue;
      }
      if (!ReadNumber(text, &v) || v < field->least || v > field->most ||
          (v == field->least && !field->least_allowed)) {
        warn("step " + name,
             "'" + name + "' needs " + field->need + ", got " + shown + ": the field ignored");
        continue;
      }
    } else if (!IsMetricName(name)) {
      warn("eval name", "an evaluation's metric is named with letters, digits and '_', got " +
                            shown + ": the field ignored");
      continue;
    } else if (!ReadNumber(text, &v)) {
      warn("eval value", "a metric needs a finite number, got " + shown + ": the field ignored");
      continue;
    }
    SetValue(e, name, v);
  }
  return warnings;
}

std::vector<std::string> ProgressLog::Feed(std::string_view bytes, double now) {
  std::vector<std::string> warnings;
  for (char c : bytes) {
    if (c != '\n') {
      if (partial_.size() < kMaxLine) partial_ += c;
      continue;
    }
    for (std::string& w : Line(partial_, now)) warnings.push_back(std::move(w));
    partial_.clear();
  }
  return warnings;
}

std::vector<std::string> ProgressLog::Finish(double now) {
  if (partial_.empty()) return {};
  std::vector<std::string> warnings = Line(partial_, now);
  partial_.clear();
  return warnings;
}

std::vector<std::string> ProgressLog::Warn(const std::string& kind, const std::string& text) {
  if (std::find(warned_.begin(), warned_.end(), kind) != warned_.end()) return {};
  warned_.push_back(kind);
  return {"progress: " + text + " (further lines like it are ignored silently)"};
}

std::vector<std::string> ProgressLog::Line(std::string_view raw, double now) {
  std::string line(raw);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  const size_t key_end = line.find(' ');
  const std::string key = line.substr(0, key_end);
  std::string value =
      key_end == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', key_end));
  // Control characters written out: a program's garbage must not send escape sequences to
  // the job's log, nor end the warning at a NUL byte.
  const std::string quoted = "'" + OneLine(line.substr(0, 80)) + "'";
  if (key.empty()) return {};  // a blank line

  if (key == "step") {
    const std::vector<std::string> tokens = Tokens(line);
    ProgressEvent e;
    e.kind = ProgressEvent::Kind::kStep;
    e.time = now;
    size_t first_field = 1;
    if (tokens.size() > 1 && tokens[1].find('=') == std::string::npos) {
      if (!ReadCount(tokens[1], &e.samples) || e.samples == 0 || e.samples > kMaxCount)
        return Warn("step", "a step line needs a positive sample count or none, got " + quoted +
                                ": ignored");
      first_field = 2;
    }
    // The step counts whatever its fields say: the stall watch and the profile need it.
    std::vector<std::string> warnings = Fields(tokens, first_field, quoted, &e);
    step_times_.push_back(now);
    step_samples_.push_back(e.samples);
    step_after_other_work_.push_back(other_work_since_step_);
    other_work_since_step_ = false;
    events_.push_back(std::move(e));
    return warnings;
  }
  if (key == "eval") {
    const std::vector<std::string> tokens = Tokens(line);
    ProgressEvent e;
    e.kind = ProgressEvent::Kind::kEval;
    e.time = now;
    std::vector<std::string> warnings = Fields(tokens, 1, quoted, &e);
    if (e.values.empty()) {
      for (std::string& w : Warn("eval", "an eval line needs at least one metric NAME=VALUE, got " +
                                             quoted + ": ignored"))
        warnings.push_back(std::move(w));
      return warnings;
    }
    other_work_since_step_ = true;
    events_.push_back(std::move(e));
    return warnings;
  }
  if (key == "checkpoint" || key == "resume") {
    ProgressEvent e;
    e.kind = key == "checkpoint" ? ProgressEvent::Kind::kCheckpoint : ProgressEvent::Kind::kResume;
    e.time = now;
    // STEP, then the path: the rest of the line, spaces and all.
    const size_t step_end = std::min(value.find(' '), value.size());
    if (step_end < value.size()) e.path = value.substr(value.find_first_not_of(' ', step_end));
    if (!ReadCount(value.substr(0, step_end), &e.step) || (key == "checkpoint" && e.path.empty()))
      return Warn(key, "'" + key + "' needs " +
                           (key == "checkpoint" ? "a step and a path" : "a step (and a path)") +
                           ", got " + quoted + ": ignored");
    other_work_since_step_ = true;
    events_.push_back(std::move(e));
    return {};
  }
  if (key == "stop") {
    if (value == "SIGUSR1" || value == "SIGTERM") {
      stop_signal_ = std::max(stop_signal_, value == "SIGTERM" ? SIGTERM : SIGUSR1);
      return {};
    }
    return Warn("stop", "'stop' needs SIGUSR1 or SIGTERM, got " + quoted + ": ignored");
  }
  if (key == "device") {
    if (value.empty()) return Warn("device", "'device' without a name: ignored");
    described_.device = value;
    return {};
  }
  auto count = [&](int64_t* field, bool positive,
                   int64_t most = INT64_MAX) -> std::vector<std::string> {
    int64_t v = 0;
    if (!ReadCount(value, &v) || (positive && v == 0) || v > most)
      return Warn(key, "'" + key + "' needs a " + (positive ? "positive" : "non-negative") +
                           " integer up to " + std::to_string(most) + ", got " + quoted +
                           ": ignored");
    *field = v;
    return {};
  };
  if (key == "params") return count(&described_.params, true);
  if (key == "samples") return count(&described_.samples, true);
  if (key == "global_batch") return count(&described_.global_batch, true, kMaxCount);
  if (key == "epochs" || key == "optimizer_slots" || key == "threads") {
    int64_t v = 0;
    std::vector<std::string> w = count(&v, key != "optimizer_slots", 1000000);
    if (!w.empty()) return w;
    (key == "epochs"    ? described_.epochs
     : key == "threads" ? described_.cpu_threads
                        : described_.optimizer_slots) = int(v);
    return {};
  }
  if (key == "lr" || key == "memory") {
    double v = 0;
    if (!ReadPositiveNumber(value, &v))
      return Warn(key, "'" + key + "' needs a positive number, got " + quoted + ": ignored");
    (key == "lr" ? described_.lr : described_.memory_bytes) = v;
    return {};
  }
  // One warning for every unknown line, whatever its first word: 10 KB of random bytes on the
  // channel gave a hundred warnings, each saying further lines like it were ignored.
  return Warn("unknown", "unknown line " + quoted + ": ignored");
}

ProfilePoint TimeSteps(const ProgressLog& log, int64_t first, int64_t count) {
  if (count < 1 || first < 1) throw Error("progress: nothing to time");
  if (log.steps() < first + count)
    throw Error("progress: " + std::to_string(log.steps()) + " steps, " +
                std::to_string(first + count) + " needed");
  const std::vector<double>& t = log.step_times();
  std::vector<double> seconds;    // every interval
  std::vector<double> step_only;  // those without other work in them
  std::vector<double> samples;
  bool all_counted = true;
  // Step k (1-based) took t[k-1] - t[k-2]: timing starts at the end of step `first`.
  for (int64_t k = first + 1; k <= first + count; ++k) {
    const double s = t[size_t(k - 1)] - t[size_t(k - 2)];
    seconds.push_back(s);
    if (!log.step_after_other_work()[size_t(k - 1)]) step_only.push_back(s);
    const int64_t n = log.step_samples()[size_t(k - 1)];
    all_counted = all_counted && n > 0;
    samples.push_back(double(n));
  }
  // Every interval had an eval or checkpoint in it: they are all there is to time.
  if (step_only.empty()) step_only = seconds;
  const double cap = 3 * Median(step_only);
  double sum = 0;
  for (double s : step_only) sum += std::min(s, cap);
  ProfilePoint p;
  p.steps = int(count);
  p.step_s = sum / double(step_only.size());
  p.step_s_min = *std::min_element(seconds.begin(), seconds.end());
  p.step_s_max = *std::max_element(seconds.begin(), seconds.end());
  // A data set that does not divide by the batch ends each epoch with a shorter step: the
  // median is the batch the program trains with.
  p.batch = all_counted ? int64_t(std::llround(Median(samples))) : 0;
  return p;
}

}  // namespace dlh
