// DLH estimator — the pure part of `dlh-estimate profile --slurm` (see slurm_profile.hpp).
#include "estimator/calibrate/slurm_profile.hpp"

#include "estimator/calibrate/slurm_calibration.hpp"

namespace dlh {

std::vector<std::string> ProfileSbatchArgs(const ProfileJob& job) {
  std::string command = ShellQuote(job.estimate) + " profile --slurm-job " + ShellQuote(job.type) +
                        " --launch " + ShellQuote(job.launch) + " --out " + ShellQuote(job.out) +
                        " --steps " + std::to_string(job.steps) + " --warmup " +
                        std::to_string(job.warmup) +
                        (job.rounds > 1 ? " --rounds " + std::to_string(job.rounds) : "") + " --";
  for (const std::string& word : job.command) command += " " + ShellQuote(word);
  return TypeJobSbatchArgs(
      {job.type, "dlh-profile-" + job.type, job.log, job.time_limit, job.partition}, command);
}

std::vector<std::string> ProfileRunArgs(const ProfileJob& job, const std::string& run_out,
                                        bool join) {
  std::vector<std::string> args = {"srun",
                                   "-n",
                                   "1",
                                   "--mpi=pmix",
                                   job.launch,
                                   "run",
                                   "--profile",
                                   std::to_string(job.steps),
                                   "--profile-warmup",
                                   std::to_string(job.warmup),
                                   "--gpu-type",
                                   job.type,
                                   "--profile-out",
                                   run_out};
  if (join) args.push_back("--profile-join");
  args.push_back("--");
  args.insert(args.end(), job.command.begin(), job.command.end());
  return args;
}

std::string ProfileTypePath(const std::string& set_path, const std::string& type,
                            const std::string& ext) {
  std::string stem = set_path;
  const std::string json = ".json";
  if (stem.size() > json.size() && stem.compare(stem.size() - json.size(), json.size(), json) == 0)
    stem.resize(stem.size() - json.size());
  return stem + "." + type + ext;
}

}  // namespace dlh
