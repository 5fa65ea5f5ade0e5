// DLH — what the program of `dlh-launch run` tells its rank about its progress, through the
// pipe whose write end it inherits as DLH_PROGRESS_FD (docs/reference/run.md,
// "The progress channel").
//
// The program writes lines of ASCII, one per write (a line shorter than PIPE_BUF arrives
// whole even when threads of the program write at once):
//   step [SAMPLES]       a training step ended (SAMPLES: what this rank trained in it)
// and, to describe the program for a profile (common/program_profile.hpp):
//   params N             trained parameter count
//   samples N            training samples per epoch
//   epochs N             epochs the run trains
//   global_batch N       the global batch
//   lr X                 the learning rate at that batch
//   optimizer_slots N    optimizer arrays per weight
//   memory BYTES         peak device memory
//   device TEXT          "cpu", "cuda:0 (NVIDIA H100 ...)"
//   threads N            CPU threads it computes with
// The rank uses the steps to notice a stalled program (run_command.cpp, --stall-timeout) and
// to time them (--profile). A line it cannot read is skipped with one warning per kind: the
// program keeps training, whatever it writes. share/python/dlh_progress.py writes these
// lines for a Python program; a shell script can `echo "step 64" >&$DLH_PROGRESS_FD`.
//
// Pure (no I/O, the time is passed in), so that it is unit-tested with plain strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/program_profile.hpp"

namespace dlh {

class ProgressLog {
 public:
  // The bytes read from the pipe at `now` seconds (any clock, increasing); lines may be
  // split across calls. Returns the warnings of lines it could not read, each at most once
  // per kind of problem ("progress: unknown line 'foo 1': ignored").
  std::vector<std::string> Feed(std::string_view bytes, double now);

  int64_t steps() const { return int64_t(step_times_.size()); }
  // The time of every step line and the samples it gave (0: none given), in order.
  const std::vector<double>& step_times() const { return step_times_; }
  const std::vector<int64_t>& step_samples() const { return step_samples_; }
  // What the description lines said (points, origin, command, created, host, gpu_type left
  // empty: the rank knows those).
  const ProgramProfile& described() const { return described_; }

 private:
  std::vector<std::string> Line(std::string_view line, double now);
  std::vector<std::string> Warn(const std::string& kind, const std::string& text);

  std::string partial_;  // the start of a line whose end has not come yet
  std::vector<double> step_times_;
  std::vector<int64_t> step_samples_;
  ProgramProfile described_;
  std::vector<std::string> warned_;  // kinds warned about
};

// The timing of steps (first, first + count] of `log` for a profile: the seconds between
// consecutive step lines (median, min, max) and the samples per step (the median of what
// those steps gave; 0 when any gave none). Throws Error when the log has fewer than
// first + count steps or count < 1.
ProfilePoint TimeSteps(const ProgressLog& log, int64_t first, int64_t count);

}  // namespace dlh
