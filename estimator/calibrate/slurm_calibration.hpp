// DLH estimator — the pure part of `dlh-estimate calibrate --slurm` (the command itself, which
// runs sinfo, sbatch, scontrol and scancel, is calibrate_slurm_cmd.cpp): which GPU types to
// calibrate, the sbatch command line of one calibration job, what `scontrol show job -o`
// says about it, and the cluster description updated to name the new calibration files.
// docs/admin-guide.md, "Calibrating through Slurm".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "estimator/cluster/cluster_from_slurm.hpp"

namespace dlh {

// ---------------------------------------------------------------- which types

struct CalibrationTypes {
  std::vector<std::string> types;  // to calibrate, in the order first seen (or of `wanted`)
  std::map<std::string, std::vector<std::string>> nodes;  // type -> the nodes offering it
  // Types that cannot be calibrated, each with one line saying why: asked for by `wanted`
  // but offered by no node (of `partition`), or a GRES type that is not a valid GPU type
  // name (it would become a file name and a cluster description key).
  std::vector<std::pair<std::string, std::string>> failed;
};

// The GPU types of the GRES of `nodes` (sinfo), on nodes of `partition` when it is not
// empty; only those in `wanted` when it is not empty (a wanted type that no node offers is
// `failed`, the others go on). Nodes without GPUs and untyped GPUs are ignored.
CalibrationTypes PickCalibrationTypes(const std::vector<SinfoNode>& nodes,
                                      const std::vector<std::string>& wanted,
                                      const std::string& partition);

// A GPU type name as the cluster description takes it: letters, digits, '-', '_', '.',
// not starting with '.' (it is also a file name).
bool ValidGpuTypeName(const std::string& name);

// ---------------------------------------------------------------- the job

struct CalibrationJob {
  std::string type;        // GRES GPU type
  std::string estimate;    // absolute path of the dlh-estimate the job runs
  std::string device;      // passed through to `calibrate --device` (cpu; cuda:N, issue 12)
  std::string out;         // absolute path of the calibration file the job writes
  std::string log;         // absolute path of the job's stdout and stderr
  std::string time_limit;  // Slurm's format, "01:00:00"
  std::string partition;   // empty: the default partition
  bool quick = false;      // the small sweep (tests)
};

// sbatch's argv: sbatch --parsable --gres=gpu:TYPE:1 --exclusive -N 1 -n 1
// --job-name=dlh-calibrate-TYPE --time=... [--partition=...] --output=LOG --wrap=COMMAND,
// where COMMAND is `estimate calibrate --device D --out OUT [--quick]`, every word quoted
// for /bin/sh, and LOG has Slurm's '%' patterns escaped.
std::vector<std::string> CalibrationSbatchArgs(const CalibrationJob& job);

// What every per-type job asks of sbatch (calibrate --slurm, profile --slurm).
struct TypeJobRequest {
  std::string type;        // GRES GPU type
  std::string job_name;    // "dlh-calibrate-alpha"
  std::string log;         // absolute path of the job's stdout and stderr
  std::string time_limit;  // Slurm's format, "01:00:00"
  std::string partition;   // empty: the default partition
};

// sbatch --parsable --gres=gpu:TYPE:1 --exclusive -N 1 -n 1 --job-name=NAME --time=...
// [--partition=...] --output=LOG --wrap=COMMAND (COMMAND already quoted for /bin/sh; LOG
// with Slurm's '%' patterns escaped).
std::vector<std::string> TypeJobSbatchArgs(const TypeJobRequest& job, const std::string& command);

// `word` quoted for /bin/sh: 'it'\''s' (any byte is safe inside single quotes but the quote).
std::string ShellQuote(const std::string& word);

// ---------------------------------------------------------------- its state

struct SlurmJobState {
  std::string state;      // JobState: PENDING, RUNNING, COMPLETED, FAILED, ... ("" unknown)
  std::string reason;     // Reason while pending or after a failure ("None" is dropped)
  std::string nodes;      // NodeList ("" while pending)
  int exit_status = -1;   // ExitCode's status (-1 unknown)
  int signal = 0;         // ExitCode's signal
  double run_s = -1;      // RunTime in seconds (-1 unknown)
  bool finished = false;  // the state is final (see JobStateFinished)
};

// The fields above from one job of `scontrol show job -o ID` (KEY=VALUE words on one line;
// a value may contain spaces). A text without JobState gives state "".
SlurmJobState ParseScontrolJob(const std::string& text);

// Whether a job in `state` has ended for good: COMPLETED, FAILED, CANCELLED, TIMEOUT,
// NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE, PREEMPTED, SPECIAL_EXIT, REVOKED.
// PENDING, RUNNING, COMPLETING (epilog still running), REQUEUED, SUSPENDED... have not.
bool JobStateFinished(const std::string& state);

// Slurm's elapsed times "[D-]HH:MM:SS", "MM:SS" -> seconds; -1 for anything else.
double ParseSlurmElapsed(const std::string& text);

// ---------------------------------------------------------------- the cluster description

// How the description at `cluster_path` names `calibration_path`: relative to its folder
// when both lie below one folder other than '/' ("calibration/alpha.json",
// "../calibration/alpha.json"), otherwise absolute. Both paths are made absolute against
// the current folder first.
std::string CalibrationPathFor(const std::string& cluster_path,
                               const std::string& calibration_path);

struct ClusterCalibrationUpdate {
  std::string text;                  // the new description, ParseCluster accepts it
  std::vector<std::string> updated;  // types whose "calibration" was set, in file order
  std::vector<std::string> absent;   // types of `calibration_of` with no gpu_types entry
};

// The description `text` (read from `cluster_path`) with "calibration" of every GPU type in
// `calibration_of` (type -> path as written) set; every other field, and the order of all
// keys, kept (a GPU type without "calibration" gets it last). The result is parsed back
// with ParseCluster. Throws EstimateError naming the file and field when `text` is not a
// valid description.
ClusterCalibrationUpdate SetClusterCalibrations(
    const std::string& text, const std::string& cluster_path,
    const std::map<std::string, std::string>& calibration_of);

}  // namespace dlh
