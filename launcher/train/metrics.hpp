// DLH — what a run reports: one JSON object per line in RUN_DIR/metrics.jsonl (rank 0),
// and a live progress line on the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace dlh {

// Appends JSON lines to a file; each line is flushed so `tail -f` and a crash both see
// complete records. An append log, not an atomic file: a failed write (disk full, quota)
// does not stop training, but the first one is reported through `warn` (on stderr when
// `warn` is empty): "<path>: cannot append (<reason>); this and later records may be
// missing". Later failures are not reported again.
class MetricsLog {
 public:
  using Warn = std::function<void(const std::string& message)>;
  MetricsLog() = default;
  // Throws Error when it cannot open.
  explicit MetricsLog(const std::string& path, Warn warn = nullptr);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);
  bool failed() const { return failed_; }  // some record could not be written

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  Warn warn_;
  bool failed_ = false;
};

enum class ProgressMode { Auto, Bar, Plain, None };
ProgressMode ParseProgressMode(const std::string& text);  // throws UsageError

// Rank 0's view of the run. Bar mode redraws one line with '\r' (a terminal); plain mode
// prints a line every ~10% of an epoch or 30 s (logs, Slurm output files).
class Progress {
 public:
  Progress(ProgressMode mode, int64_t total_steps, int64_t steps_per_epoch, int epochs);
  void step(int64_t step, int64_t epoch, double loss, double accuracy, double samples_per_s,
            double seconds_per_step);
  void line(const std::string& text);  // a message that must not be overwritten
  void finish();

 private:
  ProgressMode mode_;
  int64_t total_steps_, steps_per_epoch_;
  int epochs_;
  bool bar_open_ = false;
  double last_plain_ = -1e9;
  int64_t last_plain_step_ = -1;
};

}  // namespace dlh
