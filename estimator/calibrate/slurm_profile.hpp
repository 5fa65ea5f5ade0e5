// DLH estimator — the pure part of `dlh-estimate profile --slurm -- CMD ARGS` (the command,
// which runs Slurm's programs, is estimator/cli/profile_slurm_cmd.cpp): the files of a run,
// the sbatch command line of one type's job, and what that job runs. Each job runs
// `dlh-estimate profile --slurm-job TYPE ...` on a node of the type, which runs the program
// under `srun -n 1 --mpi=pmix dlh-launch run --profile`, probes the node and writes the
// type's profile. docs/reference/dlh-estimate.md, "Profiles measured on every type".
#pragma once

#include <string>
#include <vector>

namespace dlh {

struct ProfileJob {
  std::string type;                  // GRES GPU type
  std::string estimate;              // absolute path of the dlh-estimate the job runs
  std::string launch;                // the dlh-launch it runs the program with
  std::string out;                   // absolute path of the type's profile (written by the job)
  std::string log;                   // absolute path of the job's stdout and stderr
  std::string time_limit;            // Slurm's format, "00:10:00"
  std::string partition;             // empty: the default partition
  int steps = 20;                    // timed steps (dlh-launch run --profile)
  int warmup = 5;                    // steps before (--profile-warmup)
  int rounds = 1;                    // runs of the program in the job, joined into one profile
  std::vector<int> batches;          // each put in the command's {batch}; empty: run it as given
  std::vector<std::string> command;  // CMD ARGS
};

// The placeholder a command's words hold where --batches puts each batch.
inline constexpr const char* kBatchPlaceholder = "{batch}";

// sbatch's argv (TypeJobSbatchArgs, job name dlh-profile-TYPE) with --wrap=
//   ESTIMATE profile --slurm-job TYPE --launch LAUNCH --out OUT --steps N --warmup W
//     [--rounds R] [--batches B1,B2] -- CMD ARGS
// every word quoted for /bin/sh (--rounds only where there are several, --batches where
// there are any).
std::vector<std::string> ProfileSbatchArgs(const ProfileJob& job);

// What the job runs to time the program, writing the profile to `run_out`:
//   srun -n 1 --mpi=pmix LAUNCH run --profile N --profile-warmup W --gpu-type TYPE
//     --profile-out RUN_OUT [--profile-join] -- CMD ARGS
// `join`: every run after the first; a batch RUN_OUT holds already gains the run as one more
// round (its step_s the median of the rounds) instead of being replaced, a new one is added.
// `batch` > 0: every {batch} in the command's words replaced by it.
std::vector<std::string> ProfileRunArgs(const ProfileJob& job, const std::string& run_out,
                                        bool join = false, int batch = 0);

// The batches of the job's runs in the order run: every batch once a round, the order
// reversed every other round (32,128 then 128,32), so that a host drifting over the job
// slows no batch more than the others and the line through them keeps its slope. Without
// batches, one 0 (the command as given) a round.
std::vector<int> ProfileRunOrder(const ProfileJob& job);

// Whether some word of `command` holds {batch}.
bool HasBatchPlaceholder(const std::vector<std::string>& command);

// The files of one type next to the set `set_path`: "runs/train.json", "alpha", ".json" ->
// "runs/train.alpha.json" (the set's name less a final ".json", then ".TYPE" and `ext`).
std::string ProfileTypePath(const std::string& set_path, const std::string& type,
                            const std::string& ext);

}  // namespace dlh
