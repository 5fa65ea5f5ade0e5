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
  std::vector<std::string> command;  // CMD ARGS
};

// sbatch's argv (TypeJobSbatchArgs, job name dlh-profile-TYPE) with --wrap=
//   ESTIMATE profile --slurm-job TYPE --launch LAUNCH --out OUT --steps N --warmup W -- CMD ARGS
// every word quoted for /bin/sh.
std::vector<std::string> ProfileSbatchArgs(const ProfileJob& job);

// What the job runs to time the program, writing the profile to `run_out`:
//   srun -n 1 --mpi=pmix LAUNCH run --profile N --profile-warmup W --gpu-type TYPE
//     --profile-out RUN_OUT -- CMD ARGS
std::vector<std::string> ProfileRunArgs(const ProfileJob& job, const std::string& run_out);

// The files of one type next to the set `set_path`: "runs/train.json", "alpha", ".json" ->
// "runs/train.alpha.json" (the set's name less a final ".json", then ".TYPE" and `ext`).
std::string ProfileTypePath(const std::string& set_path, const std::string& type,
                            const std::string& ext);

}  // namespace dlh
