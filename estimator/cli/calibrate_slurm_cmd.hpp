// DLH — `dlh-estimate calibrate --slurm`: calibrates every GPU type of a Slurm cluster with
// one exclusive job per type, waits for them, checks the files they write and optionally
// points a cluster description at them (docs/admin-guide.md, "Calibrating through Slurm").
// The pure parts are in estimator/calibrate/slurm_calibration.hpp.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// `args` are calibrate's arguments (they include --slurm). Progress, one line per job state
// change, and failures go to stderr; the summary to stdout. Exit codes: 0 every type
// calibrated (and, with --cluster, recorded); 1 sinfo failed or found no GPU type; 2 bad
// option or cluster description; 3 (kExitSomeFailed) some type was not calibrated (or is
// missing from the --cluster file), the others were kept; 130 interrupted (jobs cancelled).
int CalibrateSlurmCommand(const std::vector<std::string>& args);

}  // namespace dlh
