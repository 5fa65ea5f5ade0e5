// DLH — `dlh-estimate profile --slurm` and `--slurm-job` (see profile_slurm_cmd.hpp).
#include "estimator/cli/profile_slurm_cmd.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/program_profile.hpp"
#include "estimator/calibrate/slurm_calibration.hpp"
#include "estimator/calibrate/slurm_profile.hpp"
#include "estimator/cli/slurm_jobs.hpp"
#include "estimator/model/prediction_band.hpp"
#include "launcher/probe/host_probe.hpp"

extern char** environ;

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace dlh {
namespace {

constexpr int kMaxSteps = 1000000;  // as dlh-launch run --profile takes them
// Rounds are whole runs of the program, each with its start-up: a handful gives a median
// that one slow run cannot move; a hundred is far past any use and bounds a typo's cost.
constexpr int kMaxRounds = 100;

// `args` split at the first "--": the options, and the program with its arguments.
void SplitCommand(const std::vector<std::string>& args, std::vector<std::string>* options,
                  std::vector<std::string>* command) {
  auto dashes = std::find(args.begin(), args.end(), "--");
  options->assign(args.begin(), dashes);
  if (dashes != args.end()) command->assign(dashes + 1, args.end());
}

int Count(const po::variables_map& vm, const char* name, const std::string& prefix, int most) {
  const int n = vm[name].as<int>();
  if (n < 1 || n > most)
    throw UsageError(prefix + "--" + name + ": must be 1 to " + std::to_string(most) + ", got " +
                     std::to_string(n));
  return n;
}

int Steps(const po::variables_map& vm, const char* name, const std::string& prefix) {
  return Count(vm, name, prefix, kMaxSteps);
}

// --batches "32,128": whole numbers 1 to kMaxSteps, none twice, at most kMaxBatches of them;
// and a command that holds {batch} exactly where batches are given.
constexpr int kMaxBatches = 16;
std::vector<int> Batches(const po::variables_map& vm, const std::vector<std::string>& command,
                         const std::string& prefix) {
  const bool placeholder = HasBatchPlaceholder(command);
  if (!vm.count("batches")) {
    if (placeholder)
      throw UsageError(prefix + "the command holds " + kBatchPlaceholder +
                       ": give the batches to put there with --batches B1,B2");
    return {};
  }
  std::vector<int> batches;
  std::string text = vm["batches"].as<std::string>(), word;
  std::istringstream words(text);
  while (std::getline(words, word, ',')) {
    size_t used = 0;
    long value = 0;
    try {
      value = std::stol(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (word.empty() || used != word.size() || value < 1 || value > kMaxSteps)
      throw UsageError(prefix + "--batches: \"" + word + "\" is not a batch (a whole number 1 to " +
                       std::to_string(kMaxSteps) + ")");
    if (std::count(batches.begin(), batches.end(), int(value)))
      throw UsageError(prefix + "--batches: " + word + " is given twice");
    batches.push_back(int(value));
  }
  if (batches.empty() || text.back() == ',')
    throw UsageError(prefix + "--batches: must list batches, comma-separated, got \"" + text +
                     "\"");
  if (int(batches.size()) > kMaxBatches)
    throw UsageError(prefix + "--batches: at most " + std::to_string(kMaxBatches) + ", got " +
                     std::to_string(batches.size()));
  if (!placeholder)
    throw UsageError(prefix + "--batches: the command holds no " + kBatchPlaceholder +
                     " to put each batch in (e.g. -- python3 train.py --batch " +
                     kBatchPlaceholder + ")");
  return batches;
}

// Runs `argv` with this process's environment and output; its exit status (128 + N for a
// signal), or -1 when it could not start.
int RunInJob(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return kExitSignalBase + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// ---------------------------------------------------------------- in the job

int SlurmJobCommand(const std::vector<std::string>& options,
                    const std::vector<std::string>& command) {
  po::options_description d("dlh-estimate profile --slurm-job (what profile --slurm submits)");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("slurm-job", po::value<std::string>(), "the GPU type of this job's node")
    ("launch", po::value<std::string>()->default_value("dlh-launch"), "the dlh-launch to run")
    ("out", po::value<std::string>(), "the type's profile (written atomically)")
    ("steps", po::value<int>()->default_value(20), "steps timed")
    ("warmup", po::value<int>()->default_value(5), "steps before")
    ("rounds", po::value<int>()->default_value(1), "runs of the program, joined")
    ("batches", po::value<std::string>(), "the batches put in the command's {batch}");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.prefix = "profile --slurm-job: ";
  if (ParseSubcommand(options, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  ProfileJob job;
  job.type = vm["slurm-job"].as<std::string>();
  if (!ValidGpuTypeName(job.type))
    throw UsageError("profile --slurm-job: not a valid GPU type name: " + job.type);
  if (!vm.count("out")) throw UsageError("profile --slurm-job: --out: required");
  job.out = vm["out"].as<std::string>();
  job.launch = vm["launch"].as<std::string>();
  job.steps = Steps(vm, "steps", syntax.prefix);
  job.warmup = Steps(vm, "warmup", syntax.prefix);
  job.rounds = Count(vm, "rounds", syntax.prefix, kMaxRounds);
  job.command = command;
  if (command.empty()) throw UsageError("profile --slurm-job: missing -- CMD ARGS");
  job.batches = Batches(vm, command, syntax.prefix);

  // The run's own file: dlh-launch adds to a profile already there, and this one is new.
  // Every run after the first joins (--profile-join): a batch run again keeps every round's
  // step time and takes their median, so one run slowed by a neighbour or a cold cache does
  // not become the type's profile; a batch not yet run is added.
  const std::string run_out = job.out + ".run.json";
  std::error_code ec;
  fs::remove(run_out, ec);
  const std::vector<int> order = ProfileRunOrder(job);
  const size_t per_round = order.size() / size_t(job.rounds);
  for (size_t run = 0; run < order.size(); ++run) {
    const int rc = RunInJob(ProfileRunArgs(job, run_out, run > 0, order[run]));
    if (rc == 0) continue;
    fs::remove(run_out, ec);
    std::string which = order[run] > 0 ? ", batch " + std::to_string(order[run]) : "";
    if (job.rounds > 1)
      which +=
          ", round " + std::to_string(run / per_round + 1) + " of " + std::to_string(job.rounds);
    throw Error(job.type + ": the profile run (srun -n 1 " + job.launch + " run --profile" + which +
                ") " + (rc < 0 ? "could not start srun" : "exited with " + std::to_string(rc)) +
                ": see above");
  }
  ProgramProfile p = LoadProgramProfile(run_out);
  p.origin.clear();
  p.gpu_type = job.type;
  // The node's probe, as a calibration records it, at the threads the program ran with.
  const bool gpu = p.device.rfind("cuda", 0) == 0;
  ProbeOptions o;
  o.threads = gpu ? 0 : std::max(0, p.cpu_threads);
  o.budget_s = 1;
  try {
    p.probe = ProbeDevice(gpu ? p.device.substr(0, p.device.find(' ')) : "cpu", o);
  } catch (const std::exception& e) {  // the timing is done: never lose it to the probe
    std::fprintf(stderr, "dlh-estimate: warning: %s: no probe recorded: %s\n", job.type.c_str(),
                 e.what());
  }
  WriteFileAtomically(job.out, ProgramProfileToJson(p).dump(2) + "\n");
  fs::remove(run_out, ec);
  const std::string rounds = job.rounds > 1 ? " (" + std::to_string(job.rounds) + " rounds)" : "";
  std::fprintf(stderr, "dlh-estimate: %s: profile written to %s%s\n", job.type.c_str(),
               job.out.c_str(), rounds.c_str());
  return kExitOk;
}

// ---------------------------------------------------------------- the jobs

// The dlh-launch next to this dlh-estimate (an install's bin, a build's), else PATH's.
std::string DefaultLaunch() {
  const fs::path next = fs::path(SelfPath()).parent_path() / "dlh-launch";
  return access(next.c_str(), X_OK) == 0 ? next.string() : "dlh-launch";
}

int SlurmCommand(const std::vector<std::string>& options, const std::vector<std::string>& command) {
  po::options_description d("dlh-estimate profile --slurm [options] -- CMD ARGS");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("slurm", "profile the program on each GPU type of the Slurm cluster, a job per type")
    ("types", po::value<std::string>(), "only these GRES GPU types, comma-separated "
        "(default: every type sinfo shows)")
    ("partition", po::value<std::string>(), "submit there, and profile only its nodes' types")
    ("out", po::value<std::string>()->default_value("profiles.json"), "the profile set "
        "(written atomically once every type is profiled); each type's profile and job log "
        "go next to it, OUT less .json + .TYPE.json and .TYPE.log, on a file system the nodes share")
    ("steps", po::value<int>()->default_value(20), "steps timed on each type "
        "(dlh-launch run --profile)")
    ("warmup", po::value<int>()->default_value(5), "steps before them (--profile-warmup)")
    ("rounds", po::value<int>()->default_value(1), "runs of the program in each type's job; "
        "a batch's step time is the median of its rounds (dlh-launch run --profile-join)")
    ("batches", po::value<std::string>(), "profile at each of these batches, comma-separated "
        "(e.g. 32,128), each put where the command says {batch}; every round runs each batch "
        "once, the order reversed every other round")
    ("launch", po::value<std::string>(), "the dlh-launch the jobs run (default: the one next "
        "to this dlh-estimate, else PATH's)")
    ("time", po::value<std::string>()->default_value("10m"), "each job's time limit")
    ("wait", po::value<std::string>(), "give up, and scancel what still runs, after this "
        "long (default: --time + 10m)");
  // clang-format on
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.prefix = "profile --slurm: ";
  syntax.suffix = " (see dlh-estimate profile --slurm --help)";
  if (ParseSubcommand(options, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  auto str = [&](const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string();
  };
  if (command.empty())
    throw UsageError("profile --slurm: missing -- CMD ARGS, the program to profile" +
                     syntax.suffix);
  ProfileJob spec;
  spec.steps = Steps(vm, "steps", syntax.prefix);
  spec.warmup = Steps(vm, "warmup", syntax.prefix);
  spec.rounds = Count(vm, "rounds", syntax.prefix, kMaxRounds);
  spec.time_limit = SlurmMinutes(long(std::ceil(ParseDuration(str("time"), "--time") / 60 - 1e-9)));
  const double wait_s = vm.count("wait") ? ParseDuration(str("wait"), "--wait")
                                         : ParseSlurmElapsed(spec.time_limit) + kSlurmWaitSlackS;
  std::vector<std::string> wanted;
  if (vm.count("types")) {
    wanted = SplitTypes(str("types"));
    if (wanted.empty()) throw UsageError("profile --slurm: --types: names no GPU type");
  }
  const std::string out = str("out");
  if (out.empty() || fs::is_directory(out))
    throw UsageError("profile --slurm: --out: " + (out.empty()
                                                       ? std::string("must not be empty")
                                                       : out + " is a folder: name a file"));
  const fs::path out_abs = fs::absolute(out).lexically_normal();
  if (!fs::is_directory(out_abs.parent_path()))
    throw UsageError("profile --slurm: --out: " + out + ": the folder " +
                     out_abs.parent_path().string() + " does not exist");
  spec.estimate = SelfPath();
  spec.launch = vm.count("launch") ? str("launch") : DefaultLaunch();
  spec.partition = str("partition");
  spec.command = command;
  spec.batches = Batches(vm, command, syntax.prefix);
  const std::vector<std::string> env = SlurmEnvironment();
  JobKind kind;
  kind.not_done = "not profiled";
  kind.noun = "profile";
  kind.load = [](const std::string& path) { LoadProgramProfile(path); };

  const CalibrationTypes picked = PickSlurmTypes(wanted, spec.partition, env, kind);
  std::vector<TypeJob> jobs;
  InterruptGuard guard;
  for (const std::string& type : picked.types) {
    TypeJob j = NewTypeJob(type, ProfileTypePath(out_abs.string(), type, ".json"),
                           ProfileTypePath(out_abs.string(), type, ".log"),
                           ProfileTypePath(out, type, ".json"));
    spec.type = type;
    spec.out = j.out;
    spec.log = j.log;
    SubmitJob(j, ProfileSbatchArgs(spec), env, kind);
    jobs.push_back(std::move(j));
  }
  if (WaitForJobs(jobs, env, wait_s, kind) == kExitInterrupted) return kExitInterrupted;

  std::string good, bad;
  std::vector<ProgramProfile> set;
  std::vector<std::string> where;
  for (const TypeJob& j : jobs) {
    if (!j.ok) {
      bad += (bad.empty() ? "" : ", ") + j.type;
      continue;
    }
    good += (good.empty() ? "" : ", ") + j.type + " (" + j.shown + ")";
    set.push_back(LoadProgramProfile(j.out));
    set.back().origin.clear();
    where.push_back(j.shown);
  }
  for (const auto& [type, why] : picked.failed) bad += (bad.empty() ? "" : ", ") + type;
  const size_t total = jobs.size() + picked.failed.size();
  std::string each;
  if (!spec.batches.empty()) each = spec.batches.size() > 1 ? " at batches " : " at batch ";
  for (size_t i = 0; i < spec.batches.size(); ++i)
    each += (i > 0 ? ", " : "") + std::to_string(spec.batches[i]);
  if (spec.rounds > 1) each += " in " + std::to_string(spec.rounds) + " rounds each";
  std::printf("profiled %zu of %zu GPU types through Slurm%s%s%s%s%s\n", set.size(), total,
              each.c_str(), good.empty() ? "" : ": ", good.c_str(),
              bad.empty() ? "" : "; not profiled: ", bad.c_str());
  std::fflush(stdout);
  if (set.size() != total) {
    // A set without a type would plan it as transferred without saying that a job failed.
    std::fprintf(stderr, "dlh-estimate: %s: not written: %s not profiled%s\n", out.c_str(),
                 bad.c_str(), set.empty() ? "" : "; the profiles measured are kept next to it");
    return kExitSomeFailed;
  }
  CheckProfileSet(set, out, where);
  WriteFileAtomically(out, ProfileSetToJson(set).dump(2) + "\n");
  std::printf(
      "%s: profiles of %zu GPU types; plan with dlh-estimate recommend --profile %s, "
      "or sbatch --dlh-auto=...,profile=%s\n",
      out.c_str(), set.size(), out.c_str(), out.c_str());
  return kExitOk;
}

}  // namespace

bool IsSlurmProfile(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") return false;
    if (a == "--slurm" || a == "--slurm-job" || a.rfind("--slurm-job=", 0) == 0) return true;
  }
  return false;
}

int ProfileSlurmCommand(const std::vector<std::string>& args) {
  std::vector<std::string> options, command;
  SplitCommand(args, &options, &command);
  for (const std::string& a : options)
    if (a == "--slurm-job" || a.rfind("--slurm-job=", 0) == 0)
      return SlurmJobCommand(options, command);
  return SlurmCommand(options, command);
}

}  // namespace dlh
