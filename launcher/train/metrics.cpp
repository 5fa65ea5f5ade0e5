// DLH — metrics file and progress display (see metrics.hpp).
#include "launcher/train/metrics.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "common/duration.hpp"
#include "common/error.hpp"

namespace dlh {

MetricsLog::MetricsLog(const std::string& path, Warn warn) : path_(path), warn_(std::move(warn)) {
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) throw Error(path + ": cannot open for appending: " + std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!file_) return;
  std::string text = record.dump();
  text += '\n';
  // The record only reaches the file at fflush (stdio buffers it); a short fwrite or a
  // failed fflush both mean it is not (wholly) there.
  errno = 0;
  bool ok = std::fwrite(text.data(), 1, text.size(), file_) == text.size();
  int err = ok ? 0 : errno;
  if (std::fflush(file_) != 0) {
    if (ok) err = errno;
    ok = false;
  }
  if (ok || failed_) return;
  failed_ = true;
  const std::string message = path_ + ": cannot append (" +
                              (err != 0 ? std::strerror(err) : "write error") +
                              "); this and later records may be missing";
  if (warn_)
    warn_(message);
  else
    std::fprintf(stderr, "dlh: warning: %s\n", message.c_str());
}

ProgressMode ParseProgressMode(const std::string& text) {
  if (text == "auto") return ProgressMode::Auto;
  if (text == "bar") return ProgressMode::Bar;
  if (text == "plain") return ProgressMode::Plain;
  if (text == "none") return ProgressMode::None;
  throw UsageError("--progress: must be one of auto, bar, plain, none, got '" + text + "'");
}

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progress::Progress(ProgressMode mode, int64_t total_steps, int64_t steps_per_epoch, int epochs)
    : mode_(mode), total_steps_(total_steps), steps_per_epoch_(steps_per_epoch), epochs_(epochs) {
  if (mode_ == ProgressMode::Auto)
    mode_ = isatty(STDERR_FILENO) ? ProgressMode::Bar : ProgressMode::Plain;
}

void Progress::step(int64_t step, int64_t epoch, double loss, double accuracy, double samples_per_s,
                    double seconds_per_step) {
  if (mode_ == ProgressMode::None) return;
  const int64_t in_epoch = (step - 1) % steps_per_epoch_ + 1;
  const double eta = double(total_steps_ - step) * seconds_per_step;
  char text[256];
  std::snprintf(text, sizeof text,
                "epoch %lld/%d step %lld/%lld  loss %.4f  acc %5.1f%%  %7.0f samples/s  ETA %s",
                (long long)epoch + 1, epochs_, (long long)in_epoch, (long long)steps_per_epoch_,
                loss, 100.0 * accuracy, samples_per_s, HumanDuration(eta).c_str());
  if (mode_ == ProgressMode::Bar) {
    const int width = 20;
    int filled = int(width * double(in_epoch) / double(steps_per_epoch_));
    std::string bar(size_t(filled), '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r[%s] %s\x1b[K", bar.c_str(), text);
    std::fflush(stderr);
    bar_open_ = true;
    return;
  }
  const double now = Now();
  const int64_t every = std::max<int64_t>(1, steps_per_epoch_ / 10);
  if (step - last_plain_step_ >= every || now - last_plain_ >= 30 || step == total_steps_) {
    std::fprintf(stderr, "%s\n", text);
    last_plain_ = now;
    last_plain_step_ = step;
  }
}

void Progress::line(const std::string& text) {
  if (bar_open_) std::fprintf(stderr, "\r\x1b[K");
  std::fprintf(stderr, "%s\n", text.c_str());
  bar_open_ = false;
}

void Progress::finish() {
  if (bar_open_) std::fprintf(stderr, "\n");
  bar_open_ = false;
}

}  // namespace dlh
