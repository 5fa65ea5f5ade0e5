// DLH — `dlh-estimate replay`: a job trace (a file in sacct's columns, or generated) through
// the real planning code on a simulated cluster, once per policy; the table of deadlines
// met, energy, GPU-hours, queueing delay and utilisation (estimator/replay/,
// docs/reference/replay.md).
#pragma once

#include <string>
#include <vector>

namespace dlh {

// Exit 0 with the table printed (and --json, --html, --write-trace written); 2 for bad
// options, a bad trace line (named FILE:LINE:COLUMN) or a bad cluster description.
int ReplayCommand(const std::vector<std::string>& args);

}  // namespace dlh
