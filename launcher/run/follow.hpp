// DLH — how each rank of `dlh-launch run` follows its program: the progress pipe it reads
// (progress.hpp), and the stall watch, which starts at the launch (issue 44).
//
// A stall is judged by JudgeProgramStall, a pure function of what the rank saw, so the rule is
// unit-tested with plain values (docs/reference/run.md, "A stalled program"):
//   - after a step line: no step line for --stall-timeout;
//   - before the first step line, for every program: its processes did nothing (no CPU
//     time, I/O or wake-ups: launcher/watch/activity.hpp) for --stall-timeout;
//   - before the first step line, for a program known to report its steps: no step line
//     within --stall-timeout + --stall-startup of its launch, whatever it did meanwhile.
//     A program is known to report when it wrote anything on its progress channel, when its
//     plan was made from its profile (a profile is made from step lines), or with
//     --expect-steps. A program that never writes there (an unmodified torchrun script)
//     is never judged by its steps.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "launcher/run/progress.hpp"

namespace dlh {

// The progress channel: the program writes, the rank reads without blocking.
class ProgressPipe {
 public:
  ProgressPipe();  // throws Error when pipe2 fails
  ~ProgressPipe();
  ProgressPipe(const ProgressPipe&) = delete;
  ProgressPipe& operator=(const ProgressPipe&) = delete;
  int read_fd() const { return read_fd_; }
  int write_fd() const { return write_fd_; }
  void CloseWriteEnd() { CloseFd(&write_fd_); }
  void CloseReadEnd() { CloseFd(&read_fd_); }

 private:
  static void CloseFd(int* fd);
  int read_fd_ = -1, write_fd_ = -1;
};

// Why a program reports its steps before it has written a line (ProgramStallRule::expected).
enum class StepsExpected { kNo, kOption, kProfile };

struct ProgramStallRule {
  double timeout_s = 600;  // --stall-timeout; 0: nothing is judged
  double startup_s = 600;  // --stall-startup: what the first step may take beyond timeout_s
  StepsExpected expected = StepsExpected::kNo;
};

// What the rank saw of its program, `now` seconds after the launch.
struct ProgramStallState {
  double since_launch_s = 0;
  bool heard = false;       // the program wrote on its progress channel (any line)
  int64_t steps = 0;        // its step lines
  double since_step_s = 0;  // since its last step line (steps > 0)
  double idle_s = 0;        // how long its processes did nothing (IdleClock)
};

enum class ProgramStall {
  kNone,
  kNoStep,       // no step line for timeout_s after one
  kIdle,         // no step line yet, and nothing done for timeout_s
  kNoFirstStep,  // a program that reports: no step line within timeout_s + startup_s
};

struct ProgramStallVerdict {
  ProgramStall kind = ProgramStall::kNone;
  double silent_s = 0;  // how long the condition held
};

ProgramStallVerdict JudgeProgramStall(const ProgramStallRule& rule, const ProgramStallState& state);

struct Followed {
  int status = 0;             // the program's wait status once it ended
  ProgramStallVerdict stall;  // kind != kNone: stalled, and the program still runs
  bool heard = false;         // it wrote on its progress channel
  ProgressLog log;
};

// Follows the program until it ends, reading its progress and calling `after_read` after
// each read (every 100 ms at most): returns early, the program still running, when it
// stalls (JudgeProgramStall; `launched_s` on the steady clock of SteadySeconds). With profile_end
// > 0 the program is asked to stop (SIGTERM, SIGKILL 30 s later) once it has reported that
// many steps. `who` prefixes the warnings of lines it cannot read.
Followed FollowProgram(pid_t pid, ProgressPipe* progress, const ProgramStallRule& rule,
                       double launched_s, int64_t profile_end, const std::string& who,
                       const std::function<void(ProgressLog*)>& after_read);

// Seconds on the steady clock (the progress log's clock).
double SteadySeconds();

}  // namespace dlh
