// DLH — `dlh-estimate profile --slurm [...] -- CMD ARGS`: a user's program profiled on every
// GPU type of a Slurm cluster, one short exclusive job per type (as calibrate --slurm
// calibrates; the machinery is slurm_jobs.hpp), collected into one profile set that
// `recommend --profile` and `--dlh-auto=...,profile=` plan from. And `profile --slurm-job`,
// what each of those jobs runs. docs/reference/dlh-estimate.md, "Profiles measured on every
// type"; the pure parts are estimator/calibrate/slurm_profile.hpp.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Whether profile's `args` ask for one of the two commands below (--slurm or --slurm-job
// before the "--" that starts the program).
bool IsSlurmProfile(const std::vector<std::string>& args);

// `args`: profile's (with --slurm or --slurm-job). --slurm: progress and failures on
// stderr, the summary on stdout; exit 0 every type profiled and the set written, 1 sinfo
// failed or found no GPU type, 2 bad option, 3 (kExitSomeFailed) some type not profiled
// (its profile kept, the set not written), 130 interrupted (jobs cancelled). --slurm-job:
// 0 the type's profile written, 1 the run failed.
int ProfileSlurmCommand(const std::vector<std::string>& args);

}  // namespace dlh
