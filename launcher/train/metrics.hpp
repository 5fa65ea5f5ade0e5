// DLH — what a run reports: one JSON object per line in RUN_DIR/metrics.jsonl (rank 0),
// and a live progress line on the terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace dlh {

// Appends JSON lines to a file; each line is flushed so `tail -f` and a crash both see
// complete records.
class MetricsLog {
 public:
  MetricsLog() = default;
  explicit MetricsLog(const std::string& path);  // throws Error when it cannot open
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* file_ = nullptr;
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
