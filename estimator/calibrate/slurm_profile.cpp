// DLH estimator — the pure part of `dlh-estimate profile --slurm` (see slurm_profile.hpp).
#include "estimator/calibrate/slurm_profile.hpp"

#include "estimator/calibrate/slurm_calibration.hpp"

namespace dlh {

std::vector<std::string> ProfileSbatchArgs(const ProfileJob& job) {
  std::string command = ShellQuote(job.estimate) + " profile --slurm-job " + ShellQuote(job.type) +
                        " --launch " + ShellQuote(job.launch) + " --out " + ShellQuote(job.out) +
                        " --steps " + std::to_string(job.steps) + " --warmup " +
                        std::to_string(job.warmup) +
                        (job.rounds > 1 ? " --rounds " + std::to_string(job.rounds) : "");
  for (size_t i = 0; i < job.batches.size(); ++i)
    command += (i == 0 ? " --batches " : ",") + std::to_string(job.batches[i]);
  command += " --";
  for (const std::string& word : job.command) command += " " + ShellQuote(word);
  return TypeJobSbatchArgs(
      {job.type, "dlh-profile-" + job.type, job.log, job.time_limit, job.partition}, command);
}

std::vector<std::string> ProfileRunArgs(const ProfileJob& job, const std::string& run_out,
                                        bool join, int batch) {
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
  const std::string placeholder = kBatchPlaceholder, value = std::to_string(batch);
  for (std::string word : job.command) {
    for (size_t at = 0; batch > 0 && (at = word.find(placeholder, at)) != std::string::npos;
         at += value.size())
      word.replace(at, placeholder.size(), value);
    args.push_back(word);
  }
  return args;
}

std::vector<int> ProfileRunOrder(const ProfileJob& job) {
  std::vector<int> order;
  const std::vector<int> one_round = job.batches.empty() ? std::vector<int>{0} : job.batches;
  for (int round = 0; round < job.rounds; ++round) {
    if (round % 2 == 0) {
      order.insert(order.end(), one_round.begin(), one_round.end());
    } else {
      order.insert(order.end(), one_round.rbegin(), one_round.rend());
    }
  }
  return order;
}

bool HasBatchPlaceholder(const std::vector<std::string>& command) {
  for (const std::string& word : command)
    if (word.find(kBatchPlaceholder) != std::string::npos) return true;
  return false;
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
