// DLH — `dlh-estimate calibrate --slurm` (see calibrate_slurm_cmd.hpp); the jobs' machinery,
// shared with `profile --slurm`, is in slurm_jobs.cpp.
#include "estimator/cli/calibrate_slurm_cmd.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.hpp"
#include "common/cli.hpp"
#include "common/duration.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/file_text.hpp"
#include "estimator/calibrate/slurm_calibration.hpp"
#include "estimator/cli/slurm_jobs.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/model/time_model.hpp"
#include "estimator/recommend/recommender.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace dlh {
namespace {

constexpr size_t kMaxClusterBytes = 16u << 20;

// ---------------------------------------------------------------- the cluster description

// Points `cluster_path` at the new calibrations. Returns the types it does not describe.
std::vector<std::string> UpdateCluster(const std::string& cluster_path,
                                       const std::vector<TypeJob>& jobs) {
  std::map<std::string, std::string> calibration_of;
  for (const TypeJob& j : jobs)
    if (j.ok) calibration_of[j.type] = CalibrationPathFor(cluster_path, j.out);
  if (calibration_of.empty()) return {};
  // Read again: the description may have been edited while the jobs ran.
  std::string text, why;
  if (!ReadFileText(cluster_path, kMaxClusterBytes, &text, &why))
    throw EstimateError(cluster_path + ": cannot read: " + why);
  const ClusterCalibrationUpdate u = SetClusterCalibrations(text, cluster_path, calibration_of);
  if (!u.updated.empty()) {
    if (u.text != text) WriteFileAtomically(cluster_path, u.text);
    std::string list;
    for (const std::string& t : u.updated)
      list += (list.empty() ? "" : ", ") + t + " -> " + calibration_of[t];
    std::printf("%s: calibration of %s\n", cluster_path.c_str(), list.c_str());
  }
  for (const std::string& t : u.absent)
    std::fprintf(stderr,
                 "dlh-estimate: %s: gpu_types: no GPU type '%s' for %s; add it with "
                 "dlh-estimate cluster --from-slurm\n",
                 cluster_path.c_str(), t.c_str(), calibration_of[t].c_str());
  return u.absent;
}

}  // namespace

int CalibrateSlurmCommand(const std::vector<std::string>& args) {
  po::options_description d("dlh-estimate calibrate --slurm: options");
  // clang-format off
  d.add_options()
    ("help,h", "show this help")
    ("slurm", "calibrate each GPU type of the Slurm cluster in a job of its own")
    ("types", po::value<std::string>(), "only these GRES GPU types, comma-separated "
        "(default: every type sinfo shows)")
    ("cluster", po::value<std::string>(), "point this cluster description's GPU types at their "
        "new calibrations (rewritten atomically)")
    ("out-dir", po::value<std::string>()->default_value("calibration"),
        "folder of the calibrations, TYPE.json, and job logs, TYPE.log; the jobs write there, "
        "so it must be on a file system the nodes share")
    ("device", po::value<std::string>()->default_value("cpu"),
        "passed to each job's `dlh-estimate calibrate --device` unchecked: cuda times the "
        "type's GPU, cpu its nodes' CPU engine (the local test cluster's GPUs are fake)")
    ("quick", "small sweep (seconds; for tests), not for real use")
    ("time", po::value<std::string>()->default_value("1h"), "each job's time limit (3h, 90m, "
        "1:30:00)")
    ("wait", po::value<std::string>(), "give up, and scancel what still runs, after this long "
        "(default: --time + 10m)")
    ("partition", po::value<std::string>(), "submit there, and calibrate only the types of its "
        "nodes");
  // clang-format on
  // Program_options would take calibrate's --out for an abbreviation of --out-dir.
  for (const std::string& a : args)
    if (a == "--out" || a.rfind("--out=", 0) == 0)
      throw UsageError(
          "calibrate --slurm: --out: each type writes OUT-DIR/TYPE.json; use --out-dir");
  po::variables_map vm;
  SubcommandSyntax syntax;
  syntax.prefix = "calibrate --slurm: ";
  syntax.suffix = " (see dlh-estimate calibrate --slurm --help)";
  if (ParseSubcommand(args, d, syntax, &vm) == ParseResult::kStop) {
    std::cout << d << "\n";
    return kExitOk;
  }
  auto str = [&](const char* name) {
    return vm.count(name) ? vm[name].as<std::string>() : std::string();
  };
  const std::string device = str("device");
  if (device.empty()) throw UsageError("calibrate --slurm: --device: must not be empty");
  const std::string time_limit =
      SlurmMinutes(long(std::ceil(ParseDuration(str("time"), "--time") / 60 - 1e-9)));
  const double wait_s = vm.count("wait") ? ParseDuration(str("wait"), "--wait")
                                         : ParseSlurmElapsed(time_limit) + kSlurmWaitSlackS;
  std::vector<std::string> wanted;
  if (vm.count("types")) {
    wanted = SplitTypes(str("types"));
    if (wanted.empty()) throw UsageError("calibrate --slurm: --types: names no GPU type");
  }
  const std::string cluster_path = str("cluster");
  if (!cluster_path.empty()) LoadCluster(cluster_path);  // a bad file fails now, not in an hour
  const std::string out_dir = str("out-dir");
  if (out_dir.empty()) throw UsageError("calibrate --slurm: --out-dir: must not be empty");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw IoError(out_dir, ec.message());
  const fs::path out_abs = fs::absolute(out_dir).lexically_normal();
  const std::vector<std::string> env = SlurmEnvironment();
  JobKind kind;  // "not calibrated", "calibration"
  kind.load = [](const std::string& path) { LoadCalibration(path); };

  // ---- which types
  const CalibrationTypes picked = PickSlurmTypes(wanted, str("partition"), env, kind);

  // ---- one job per type
  CalibrationJob spec;
  spec.estimate = SelfPath();
  spec.device = device;
  spec.time_limit = time_limit;
  spec.partition = str("partition");
  spec.quick = vm.count("quick") > 0;
  std::vector<TypeJob> jobs;
  InterruptGuard guard;
  for (const std::string& type : picked.types) {
    TypeJob j = NewTypeJob(type, (out_abs / (type + ".json")).string(),
                           (out_abs / (type + ".log")).string(),
                           (fs::path(out_dir) / (type + ".json")).lexically_normal().string());
    spec.type = type;
    spec.out = j.out;
    spec.log = j.log;
    SubmitJob(j, CalibrationSbatchArgs(spec), env, kind);
    jobs.push_back(std::move(j));
  }

  // ---- wait
  if (WaitForJobs(jobs, env, wait_s, kind) == kExitInterrupted) return kExitInterrupted;

  // ---- results
  std::string good, bad;
  int calibrated = 0;
  for (const TypeJob& j : jobs) {
    if (j.ok)
      good += (good.empty() ? "" : ", ") + j.type + " (" + j.shown + ")", ++calibrated;
    else
      bad += (bad.empty() ? "" : ", ") + j.type;
  }
  for (const auto& [type, why] : picked.failed) bad += (bad.empty() ? "" : ", ") + type;
  const size_t total = jobs.size() + picked.failed.size();
  std::printf("calibrated %d of %zu GPU types through Slurm%s%s%s%s\n", calibrated, total,
              good.empty() ? "" : ": ", good.c_str(),
              bad.empty() ? "" : "; not calibrated: ", bad.c_str());
  // The default suits the local test cluster, whose GPUs are fake; a site with real ones
  // that left it out has its GPUs planned at the speed of their nodes' CPUs (2026-12-07).
  if (calibrated > 0 && device == "cpu")
    std::printf(
        "note: --device cpu: each GPU type was timed on its node's CPU cores, as on a "
        "test cluster with fake GPUs; a site with real GPUs calibrates them with "
        "--device cuda\n");
  std::fflush(stdout);
  bool missing = false;
  if (!cluster_path.empty()) missing = !UpdateCluster(cluster_path, jobs).empty();
  return size_t(calibrated) == total && !missing ? kExitOk : kExitSomeFailed;
}

}  // namespace dlh
