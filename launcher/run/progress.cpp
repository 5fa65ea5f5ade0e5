// DLH — the progress channel of `dlh-launch run` (see progress.hpp).
#include "launcher/run/progress.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "common/error.hpp"
#include "common/median.hpp"

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

bool ReadPositiveNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || *end != '\0' || !std::isfinite(v) || v <= 0) return false;
  *out = v;
  return true;
}

}  // namespace

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
  const std::string quoted = "'" + line.substr(0, 80) + "'";
  if (key.empty()) return {};  // a blank line

  if (key == "step") {
    int64_t samples = 0;
    if (!value.empty() && (!ReadCount(value, &samples) || samples == 0 || samples > kMaxCount))
      return Warn("step",
                  "a step line needs a positive sample count or none, got " + quoted + ": ignored");
    step_times_.push_back(now);
    step_samples_.push_back(samples);
    return {};
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
  return Warn("unknown " + key, "unknown line " + quoted + ": ignored");
}

ProfilePoint TimeSteps(const ProgressLog& log, int64_t first, int64_t count) {
  if (count < 1 || first < 1) throw Error("progress: nothing to time");
  if (log.steps() < first + count)
    throw Error("progress: " + std::to_string(log.steps()) + " steps, " +
                std::to_string(first + count) + " needed");
  const std::vector<double>& t = log.step_times();
  std::vector<double> seconds;
  std::vector<double> samples;
  bool all_counted = true;
  // Step k (1-based) took t[k-1] - t[k-2]: timing starts at the end of step `first`.
  for (int64_t k = first + 1; k <= first + count; ++k) {
    seconds.push_back(t[size_t(k - 1)] - t[size_t(k - 2)]);
    const int64_t n = log.step_samples()[size_t(k - 1)];
    all_counted = all_counted && n > 0;
    samples.push_back(double(n));
  }
  ProfilePoint p;
  p.steps = int(count);
  p.step_s = Median(seconds);
  p.step_s_min = *std::min_element(seconds.begin(), seconds.end());
  p.step_s_max = *std::max_element(seconds.begin(), seconds.end());
  // A data set that does not divide by the batch ends each epoch with a shorter step: the
  // median is the batch the program trains with.
  p.batch = all_counted ? int64_t(std::llround(Median(samples))) : 0;
  return p;
}

}  // namespace dlh
