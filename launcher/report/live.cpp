// DLH — following a running job (see live.hpp).
#include "launcher/report/live.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/report/headline.hpp"
#include "launcher/report/report_html.hpp"

namespace dlh::report {
namespace {

void Sleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

bool Ended(RunState state) { return state == RunState::Finished || state == RunState::Stopped; }

// The run, or false while its folder holds nothing yet (a pending job) or a file is
// being replaced under us: the caller waits and tries again.
bool TryLoad(const std::string& dir, RunData* run) {
  try {
    *run = LoadRun(dir);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int Follow(const LiveOptions& o) {
  const bool terminal = isatty(STDOUT_FILENO) == 1;
  bool waiting_said = false, drawn = false;
  for (;;) {
    RunData run;
    if (!TryLoad(o.run_dir, &run)) {
      if (!waiting_said)
        std::cout << "dlh-report: waiting for " << o.run_dir << " to start\n" << std::flush;
      waiting_said = true;
      Sleep(o.interval_s);
      continue;
    }
    const Headline h = HeadlineOf(run, Now());
    if (h.state == RunState::Unknown && !drawn) {  // a folder, but nothing logged yet
      Sleep(o.interval_s);
      continue;
    }
    std::string block = "DLH run " + h.name + " (" + o.run_dir + ")\n";
    for (const auto& [name, value] : HeadlineRows(h)) {
      char line[512];
      std::snprintf(line, sizeof line, "  %-24s %s\n", name.c_str(), value.c_str());
      block += line;
    }
    for (const std::string& p : run.problems) block += "  note: " + p + "\n";
    // Home and clear on a terminal; a separator in a log.
    std::cout << (terminal ? "\033[H\033[2J" : (drawn ? "--\n" : "")) << block << std::flush;
    drawn = true;
    if (Ended(h.state)) return kExitOk;
    Sleep(o.interval_s);
  }
}

int Watch(const LiveOptions& o) {
  bool waiting_said = false;
  for (;;) {
    RunData run;
    if (!TryLoad(o.run_dir, &run)) {
      if (!waiting_said) std::cerr << "dlh-report: waiting for " << o.run_dir << " to start\n";
      waiting_said = true;
      Sleep(o.interval_s);
      continue;
    }
    const double now = Now();
    const RunState state = StateOf(run, now, o.fresh_s);
    ReportOptions ro;
    ro.now = now;
    ro.refresh_s = Ended(state) ? 0 : o.refresh_s;
    WriteFileAtomically(o.out, ReportHtml(run, ro));
    if (Ended(state)) return kExitOk;
    Sleep(o.interval_s);
  }
}

}  // namespace dlh::report
