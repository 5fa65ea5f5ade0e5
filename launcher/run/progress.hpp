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
// and, for the run's records (run_records.hpp: metrics.jsonl and summary.json):
//   step [SAMPLES] [NAME=VALUE ...]   the step's loss, accuracy, lr, samples_per_s, epoch, and
//                        this rank's seconds in data, compute and allreduce
//   eval [epoch=N] [step=N] NAME=VALUE ...   an evaluation's metrics (test_loss=0.41 ...)
//   checkpoint STEP PATH a checkpoint of step STEP is complete at PATH
//   resume STEP [PATH]   the program resumed at step STEP (from PATH)
// The rank uses the steps to notice a stalled program (run_command.cpp, --stall-timeout) and
// to time them (--profile). A line it cannot read is skipped with one warning per kind, and
// a field it cannot read (NAME=VALUE) is dropped with one warning per name, the rest of the
// line counting: the program keeps training, whatever it writes.
// share/python/dlh_progress.py writes these lines for a Python program; a shell script can
// `echo "step 64 loss=0.5" >&$DLH_PROGRESS_FD`.
//
// Pure (no I/O, the time is passed in), so that it is unit-tested with plain strings.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/program_profile.hpp"

namespace dlh {

// A step, eval, checkpoint or resume line, as read (values not given: -1, empty).
struct ProgressEvent {
  enum class Kind { kStep, kEval, kCheckpoint, kResume };
  Kind kind = Kind::kStep;
  double time = 0;      // the `now` of the Feed that completed the line
  int64_t samples = 0;  // step: SAMPLES (0: none given)
  int64_t step = -1;    // checkpoint and resume: STEP; eval: step=
  int64_t epoch = -1;   // step and eval: epoch=
  std::string path;     // checkpoint: PATH; resume: PATH ("": none given)
  // step: those of loss, accuracy, lr, samples_per_s, data, compute, allreduce given;
  // eval: its metrics. In the line's order; a name given twice: the last value.
  std::vector<std::pair<std::string, double>> values;
  // The value named `name`, else `fallback`.
  double value(const std::string& name, double fallback) const;
};

class ProgressLog {
 public:
  // The bytes read from the pipe at `now` seconds (any clock, increasing); lines may be
  // split across calls. Returns the warnings of lines it could not read, each at most once
  // per kind of problem ("progress: unknown line 'foo 1': ignored").
  std::vector<std::string> Feed(std::string_view bytes, double now);
  // The program is gone (or every writer closed the pipe): a last line it wrote without a
  // newline is a line too. Returns its warnings, as Feed.
  std::vector<std::string> Finish(double now);

  int64_t steps() const { return int64_t(step_times_.size()); }
  // The time of every step line and the samples it gave (0: none given), in order.
  const std::vector<double>& step_times() const { return step_times_; }
  const std::vector<int64_t>& step_samples() const { return step_samples_; }
  // For every step line: whether an eval, checkpoint or resume line came between it and the
  // step line before (the interval holds work that is no step's).
  const std::vector<bool>& step_after_other_work() const { return step_after_other_work_; }
  // What the description lines said (points, origin, command, created, host, gpu_type left
  // empty: the rank knows those).
  const ProgramProfile& described() const { return described_; }
  // The step, eval, checkpoint and resume lines read since the last call, in order.
  std::vector<ProgressEvent> TakeEvents() { return std::move(events_); }
  // The stop the program said it is obeying ("stop SIGUSR1" or "stop SIGTERM": the dlh
  // module writes it when should_stop() first says True), the signal's number; 0: none. A
  // rank's program may stop for a signal only another rank was sent, which the ranks agreed on.
  int stop_signal() const { return stop_signal_; }

 private:
  std::vector<std::string> Line(std::string_view line, double now);
  std::vector<std::string> Warn(const std::string& kind, const std::string& text);
  // step and eval: NAME=VALUE fields into `e`; a bad one is dropped with a warning.
  std::vector<std::string> Fields(const std::vector<std::string>& tokens, size_t first,
                                  const std::string& quoted, ProgressEvent* e);

  std::string partial_;  // the start of a line whose end has not come yet
  std::vector<double> step_times_;
  std::vector<int64_t> step_samples_;
  std::vector<bool> step_after_other_work_;
  bool other_work_since_step_ = false;  // an eval, checkpoint or resume line since the last step
  ProgramProfile described_;
  std::vector<ProgressEvent> events_;  // not taken yet
  std::vector<std::string> warned_;    // kinds warned about
  int stop_signal_ = 0;
};

// The timing of steps (first, first + count] of `log` for a profile: the seconds between
// consecutive step lines and the samples per step (the median of what those steps gave; 0
// when any gave none). The step time is a rate's: the mean of the intervals, not their
// median. A rank that runs in bursts (a CPU quota's period, a shared node) takes steps of
// one burst or two, and their median is either kind: make bench's beta (mixed_shares.sh,
// 39% of a core in 10 ms periods) took steps of 32 samples of about 10 or 20 ms, and three
// 20-step profiles gave medians of 11.5, 18.4 and 18.1 ms, means of 14.6, 16.0 and 16.4
// (2026-12-04); at 128 samples both were 50 ms. The plan moved with the median. An interval with an
// eval, checkpoint or resume line in it is left out (that work is no step's), and each interval
// counts at most 3x the median, so that one pause the program did not report (a collection, a
// page-in) moves the mean little: the rule of the Balancer's window (share/python/dlh/balance.py,
// window_seconds). min and max are of every interval. Throws Error when the log has fewer than
// first + count steps or count < 1.
ProfilePoint TimeSteps(const ProgressLog& log, int64_t first, int64_t count);

}  // namespace dlh
