// DLH — the run report: one self-contained HTML page with every chart of a run (training
// curves, speed and its step-time breakdown, ranks, the timeline of attempts, checkpoints,
// signals and resumes, the plan against what happened), built from a RunData. Whatever the
// folder could not give is said on the page, never fatal.
#pragma once

#include <string>

#include "launcher/report/run_data.hpp"

namespace dlh::report {

struct ReportOptions {
  double now = 0;            // Unix seconds: the page's "as of", and whether the run is live
  int refresh_s = 0;         // > 0: the page reloads itself (a running job's report)
  size_t max_points = 1200;  // per series: longer runs are averaged into this many points
};

std::string ReportHtml(const RunData& run, const ReportOptions& options);

}  // namespace dlh::report
