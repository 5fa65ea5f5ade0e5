// DLH — following a running job: dlh-report --follow (a terminal view of the headline,
// redrawn every few seconds) and dlh-report --watch (the HTML report rewritten as metrics
// arrive). Both wait for a run folder that does not exist yet (a job still pending), and
// end when the run finishes or stops.
#pragma once

#include <string>

namespace dlh::report {

struct LiveOptions {
  std::string run_dir;
  double interval_s = 5;  // between redraws / rewrites
  double fresh_s = 60;    // a run silent this long is no longer running (RunState)
  int refresh_s = 10;     // --watch: the page's own reload period
  std::string out;        // --watch: the report's path
};

// Prints the headline to stdout every interval until the run ends; redraws in place on a
// terminal, prints one block per interval otherwise (a log). Returns the exit code.
int Follow(const LiveOptions& options);

// Rewrites the report (atomically) every interval until the run ends, then once more
// without the page's reload. Returns the exit code.
int Watch(const LiveOptions& options);

// Unix seconds now.
double Now();

}  // namespace dlh::report
