// DLH estimator — planning from a program's profile (common/program_profile.hpp: its
// steps timed by dlh-launch run --profile) instead of from a training spec. The profile
// knows the time of a step on one device, not the program's layers, so it replaces both
// the spec's features (for memory, the allreduce and checkpoints) and the time model (for
// the step):
//   the profiled type   the measured line t(b) = fixed + per_sample * b (FitProfileLine)
//   every other type    per_sample / (peak FLOP/s ratio), fixed kept: a user's program is
//                       dominated by GEMMs, whose time moves with the peak, while the
//                       per-step overhead is set by the host (wave_scaling.hpp)
// A profile set (dlh-estimate profile --slurm: one profile per GPU type) plans each measured
// type from its own profile, and scales to a type no profile measured from the measured type
// closest in peaks (ClosestType, as a calibration is carried to an uncalibrated type).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/program_profile.hpp"
#include "estimator/cluster/cluster.hpp"
#include "estimator/recommend/recommender.hpp"

namespace dlh {

// The Job the recommender plans from a profile: job.profile set, spec and features filled
// from it (see the source for each field), samples and epochs the profile's (0 when it does
// not know them: the caller asks for them), and threads_per_rank the program's own count
// when it sets one (ProgramSetsItsThreads). The rest keeps Job's defaults.
Job JobFromProfile(const ProgramProfile& profile);

// Whether a CPU program computes with a thread count of its own rather than the one it is
// offered: profiled, it said `threads N` (cpu_threads) other than the OMP_NUM_THREADS it
// got (threads_offered), as torch.set_num_threads(1) does. Its ranks then run that many
// threads whatever the node's cores: planned as if they were the rank's share, a program
// pinned to 1 thread on a 2-core node was predicted at 2.06 ms a step and took 3.53 ms
// (2026-12-07).
bool ProgramSetsItsThreads(const ProgramProfile& profile);

// The Job of a profile set (LoadProfiles): JobFromProfile of the first profile (its program's
// size, samples, batch and rate), `profiles` all of them. CheckProfileSet first (UsageError).
Job JobFromProfiles(const std::vector<ProgramProfile>& set);

// Where each GPU type's speed comes from when the job has a profile.
struct ProfileSources {
  std::map<std::string, const ProgramProfile*> measured;  // type -> the profile timed on it
  std::map<std::string, std::string> transferred;         // unmeasured type -> measured type scaled
};

// Every profile of the job (job.profiles, else job.profile) on its type (ProfiledGpuType:
// UsageError naming the profile for a type the cluster lacks), and every other GPU type of
// the cluster from the measured one closest in peaks. Pointers into `job`.
ProfileSources ProfileSourcesOf(const Job& job, const Cluster& cluster);

// The same read back from the speeds a plan used (only its allowed types; a speed with no
// reference was measured; `measured` maps to nullptr).
ProfileSources ProfileSourcesOfSpeeds(const std::map<std::string, DeviceSpeed>& speeds);

// "measured on alpha, beta; transferred to gamma (from beta)": for the plan's text.
std::string ProfileSourcesText(const ProfileSources& sources);

// The step-time line through a profile's points, with how it was made for the speed's
// source text ("1 batch, 64: proportional", "2 batches, 64-256").
//   1 point     proportional: fixed 0, per_sample = step_s / batch (nothing tells the
//               fixed part from the rest, and a line through the origin never predicts a
//               smaller batch as slower per sample than measured)
//   2 or more   least squares of the relative error (weights 1/t^2 on the squared residual,
//               so a long step does not outvote short ones); a negative fixed part is refit
//               through the origin, and a slope that is not positive (larger batches no
//               slower) becomes a flat line at the weighted mean time
struct ProfileLine {
  double fixed_s = 0, per_sample_s = 0;
  std::string how;
};
ProfileLine FitProfileLine(const std::vector<ProfilePoint>& points);

// The cluster's GPU type the profile was timed on: profile.gpu_type, or the cluster's only
// type when the profile names none. Throws UsageError naming the profile when the type is
// not in the cluster or the profile names none and the cluster has several.
const GpuType& ProfiledGpuType(const ProgramProfile& profile, const Cluster& cluster);

// The speed of `target` from the profile timed on `profiled` (DeviceSpeeds with
// job.profile set): the measured line on the profiled type, scaled on the others;
// cpu_threads is the profile's on all of them.
DeviceSpeed ProfileSpeed(const ProgramProfile& profile, const GpuType& profiled,
                         const GpuType& target);

// What the plan leaves out because the profile does not know it: "prof.json: params
// unknown: allreduce time and checkpoint size are taken as 0 ...". Empty when it knows all.
std::vector<std::string> ProfileWarnings(const ProgramProfile& profile);

}  // namespace dlh
