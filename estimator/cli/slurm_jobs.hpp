// DLH — one short exclusive Slurm job per GPU type, watched to its end: what
// `dlh-estimate calibrate --slurm` (calibrate_slurm_cmd.cpp) and `dlh-estimate profile
// --slurm` (profile_slurm_cmd.cpp) share. Runs sinfo, sbatch, scontrol, sacct and scancel
// with a cleaned environment and a timeout each; prints one progress line per job state
// change; judges a job that has ended by the file it had to write (new, and loadable);
// cancels what still runs on --wait or an interrupt. The sbatch command lines themselves are
// pure (estimator/calibrate/slurm_calibration.hpp, slurm_profile.hpp).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "estimator/calibrate/slurm_calibration.hpp"

namespace dlh {

constexpr double kSlurmCommandTimeoutS = 30;  // one sinfo, sbatch, scontrol or scancel
constexpr double kSlurmWaitSlackS = 600;      // default --wait: the time limit + this
constexpr int kExitInterrupted = 130;

// The caller's environment less what would change a submission or the output parsed here
// (SLURM_*, SBATCH_*, SALLOC_*, SRUN_*, SINFO_*, SCONTROL_*, SQUEUE_*, DLH_*); SLURM_CONF stays.
std::vector<std::string> SlurmEnvironment();

struct ProgramResult {
  std::string out, err;
  std::string failure;  // empty: it exited 0; otherwise why not, in words
};

// Runs argv[0] (found in PATH) with `env`, stdin /dev/null, killed after timeout_s.
ProgramResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         double timeout_s);

// "sbatch failed (exit status 1): sbatch: error: ..."
std::string Failed(const std::string& what, const ProgramResult& r);

// The first non-blank line of `text`, trimmed.
std::string FirstLine(const std::string& text);

// SIGINT, SIGTERM and SIGHUP only set a flag while it lives (JobsInterrupted), so that the
// jobs can be cancelled rather than left running; the previous handlers come back after.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct Saved;
  Saved* saved_;
};
int JobsInterrupted();  // the signal caught, 0 none

// What the jobs of one command make, for its messages and its check of their files.
struct JobKind {
  std::string not_done = "not calibrated";  // "dlh-estimate: alpha: not calibrated: ..."
  std::string noun = "calibration";         // "(it holds an older calibration)"
  // Throws Error (one line) when the file at the path is not what the job had to write.
  std::function<void(const std::string& path)> load;
};

// What a file was before the job ran (a job that exits 0 without writing must not pass
// because an older file lies at the path; files are written by rename: a new inode).
struct FileStamp {
  bool exists = false;
  ino_t inode = 0;
  timespec mtime{};
  bool operator==(const FileStamp& o) const {
    return exists == o.exists && inode == o.inode && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};
FileStamp Stamp(const std::string& path);

struct TypeJob {
  std::string type;
  std::string out;    // absolute
  std::string shown;  // the file as the user named its folder
  std::string log;    // absolute
  FileStamp before;
  long id = 0;  // 0: not submitted
  std::chrono::steady_clock::time_point submitted;
  std::string phase;  // the last state reported: "submitted", "running on alpha1", ...
  bool done = false, ok = false;
  std::string why;  // when done and not ok
  std::vector<std::string> tail;
};

// A job of `type` that writes `out` (absolute) and logs to `log`; `shown` names `out` in
// messages. Stamps `out` as it is now.
TypeJob NewTypeJob(const std::string& type, const std::string& out, const std::string& log,
                   const std::string& shown);

// Submits `sbatch_args` (sbatch --parsable ...). A failure concludes the job and is printed.
void SubmitJob(TypeJob& j, const std::vector<std::string>& sbatch_args,
               const std::vector<std::string>& env, const JobKind& kind);

// Watches every submitted job until all have ended (each concluded: its file new and loaded
// by kind.load, or why not, printed), cancelling the rest after wait_s or on an interrupt.
// Returns 0, or kExitInterrupted when interrupted.
int WaitForJobs(std::vector<TypeJob>& jobs, const std::vector<std::string>& env, double wait_s,
                const JobKind& kind);

// sinfo's GPU types (PickCalibrationTypes): each failed one printed as "dlh-estimate: TYPE:
// <kind.not_done>: why". Throws Error when sinfo fails or shows no typed GPU at all.
CalibrationTypes PickSlurmTypes(const std::vector<std::string>& wanted,
                                const std::string& partition, const std::vector<std::string>& env,
                                const JobKind& kind);

// "a, b" -> {"a", "b"} (blanks trimmed, empty items dropped).
std::vector<std::string> SplitTypes(const std::string& text);

// This program's absolute path (/proc/self/exe): what the jobs run.
std::string SelfPath();

}  // namespace dlh
