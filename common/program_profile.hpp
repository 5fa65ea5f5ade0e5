// DLH — the profile of a user's own program: its steps timed on one device at one or more
// batches (dlh-launch run --profile), and what the program said about itself. The
// estimator plans from it as it plans from a training spec and a calibration
// (estimator/recommend/profile_speeds.hpp). JSON, documented in docs/reference/run.md
// ("Planning from a profile");
// every error names the file and the field:
//   prof.json: points[1].step_s: must be a positive number, got 0
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlh {

// The format version ProgramProfileToJson writes ("dlh_profile": 1) and the reader accepts.
constexpr int kProgramProfileVersion = 1;

// The longest step a profile may give (seconds: a day).
constexpr double kMaxProfileStepS = 86400;

struct ProfilePoint {
  int64_t batch = 0;  // samples per step on the one device (> 0)
  // Seconds per step (> 0): one run's mean step (launcher/run/progress.hpp, TimeSteps), or
  // the median of `rounds` when several runs were joined.
  double step_s = 0;
  double step_s_min = 0, step_s_max = 0;  // over every timed step; 0: not given
  int steps = 0;                          // steps timed (> 0), in all rounds
  // Each run's step_s, in the order they ran, when the batch was timed in two runs or more
  // (dlh-launch run --profile-join); empty: one run. A host whose speed drifts for minutes
  // moves a whole run, so rounds interleaved with the other batches' (and types') runs, and
  // their median, keep one slow minute from bending the step-time line.
  std::vector<double> rounds;
};

struct ProgramProfile {
  std::string origin;                // file it was read from ("" when made in memory)
  std::string program;               // display name, e.g. "train_ddp.py"
  std::vector<std::string> command;  // CMD ARGS as profiled
  std::string created, host;         // ISO 8601 UTC; host name
  std::string gpu_type;  // the cluster description's GPU type it was timed on ("" unknown)
  std::string device;    // what the program said it ran on ("cpu", "cuda:0 (...)"), "" unknown
  int cpu_threads = 0;   // > 0: a CPU process with this many threads, 0: a GPU
  // The threads the program was offered when profiled: OMP_NUM_THREADS as it got it
  // (dlh-launch run sets the rank's share of its CPUs where the environment sets none);
  // 0: unknown. A cpu_threads other than this is a program that sets its own count
  // (estimator/recommend/profile_speeds.hpp, ProgramSetsItsThreads).
  int threads_offered = 0;
  int64_t params = 0;        // trained values (0: unknown)
  int64_t samples = 0;       // training samples per epoch (0: unknown)
  int epochs = 0;            // (0: unknown)
  int64_t global_batch = 0;  // the program's global batch (0: the largest point's batch)
  double lr = 0;             // learning rate at global_batch (0: unknown)
  int optimizer_slots = 1;   // state arrays per weight: SGD 0, SGD+momentum 1, Adam 2
  double memory_bytes = 0;   // peak device memory at the largest point's batch (0: unknown)
  // The node's device probe (launcher/probe/host_probe.hpp, what calibrations record), taken
  // after the run by `dlh-estimate profile --slurm`; null: not recorded. Kept as read.
  nlohmann::json probe;
  std::vector<ProfilePoint> points;  // distinct batches, sorted by batch, at least one
};

// Every field by its member's name, points as {batch, step_s, step_s_min, step_s_max, steps}
// and "rounds" when there are any, and "dlh_profile": 1; not `origin` (where a file is, not
// what it says).
nlohmann::json ProgramProfileToJson(const ProgramProfile& p);

// Throws UsageError "<origin>: <field>: <what is wrong>": not an object, unknown key,
// missing dlh_profile or points, an unknown format version, a wrong type, a value out of
// range, no points, a duplicate batch. Only dlh_profile and points are required (the
// rest default as above). Points come back sorted by batch.
ProgramProfile ProgramProfileFromJson(const nlohmann::json& j, const std::string& origin);

// Throws UsageError naming `path`: cannot read, not JSON (one line), bad fields as above.
ProgramProfile LoadProgramProfile(const std::string& path);

// `update` (one new run, usually one point) merged into `base` (the file already there): a
// point of the same batch is replaced (with `join_rounds`: joined, as one more round: its
// rounds follow base's, step_s is their median, min and max the extremes of both, steps
// their sum), the others kept, sorted. The scalar fields come from `update` where it knows
// them (non-zero, non-empty), else from `base`; optimizer_slots from `update` unless it is
// the default 1; memory_bytes from `update` only when its batch is the largest of the
// result (the field is the peak at that batch). The origin stays `base`'s. Throws
// UsageError when both name a gpu_type and they differ, or both give params and they differ
// ("<base.origin>: profiled on alpha, this run is on beta: use another --profile-out").
ProgramProfile MergeProfiles(const ProgramProfile& base, const ProgramProfile& update,
                             bool join_rounds = false);

// ---- profile sets: one profile per GPU type of one program (dlh-estimate profile --slurm)
//   {"dlh_profile_set": 1, "profiles": [PROFILE, ...]}

constexpr int kProfileSetVersion = 1;

nlohmann::json ProfileSetToJson(const std::vector<ProgramProfile>& set);

// Throws UsageError "<origin>: profiles[1].gpu_type: ...": each profile as
// ProgramProfileFromJson reads one (their origin is `origin`), then CheckProfileSet.
std::vector<ProgramProfile> ProfileSetFromJson(const nlohmann::json& j, const std::string& origin);

// What a set must be (also of profiles from several files; `where` names each, default
// "profiles[i]"): at least one profile; with several, each names its gpu_type, no type
// twice, and all are of one program (params and program equal where both give them).
void CheckProfileSet(const std::vector<ProgramProfile>& set, const std::string& origin,
                     const std::vector<std::string>& where = {});

// The profiles in `path`: a profile set, or one profile (a set of one). Throws UsageError
// naming the file and the field.
std::vector<ProgramProfile> LoadProfiles(const std::string& path);

}  // namespace dlh
