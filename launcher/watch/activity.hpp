// DLH — is a process still doing anything? The CPU time and the bytes read and written of its
// threads, as /proc counts them, and a clock of how long they have stood still (issue 41).
//
// Why: a rank whose main thread hangs outside MPI (a deadlock, a read from a file system that
// no longer answers, a thread stopped by a debugger) still writes its heartbeats, so its peers
// see it alive and "computing", and could only wait. A computing rank uses CPU or moves bytes;
// a hung one does neither. The watchdog thread leaves itself out (its heartbeats are I/O), so
// what it sees is the rank's own work: the main thread, the BLAS threads, the loader and the
// checkpoint writer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace dlh {

struct ProcessActivity {
  double cpu_s = 0;       // user + system CPU seconds of the threads counted
  uint64_t io_bytes = 0;  // bytes read and written through system calls (rchar + wchar)
  uint64_t wakeups = 0;   // context switches: a thread that polls (for a GPU's event, with
                          // short sleeps) wakes thousands of times a second on little CPU
};

// This process's threads, all but `skip_tid` (0: none). Threads that end in between are
// simply not counted; never throws.
ProcessActivity ReadProcessActivity(pid_t skip_tid);
// Another process and every process it started, theirs in turn included (a program
// dlh-launch run started: a shell script whose work is done by the commands it runs, a
// launcher and its workers); zero when it is gone.
ProcessActivity ReadProcessTreeActivity(pid_t pid);

// A thread's scheduler state and what it waits in, for a line that says where it hangs:
// "sleeping in pipe_read", "in disk sleep in nfs_wait_bit_killable", "stopped (traced)";
// empty when unknown.
std::string DescribeThreadState(pid_t tid);

// How long a process has done nothing: fed a reading every watchdog tick, it restarts its
// clock whenever the CPU time grew by at least kMinCpuShare of the time between readings,
// bytes moved (kMinIoBytes or more), its threads woke kMinWakeupsPerS times a second or more
// (an idle runtime's timers wake a few times), or `progress` (steps, MPI calls entered)
// changed.
class IdleClock {
 public:
  static constexpr double kMinCpuShare = 0.02;
  static constexpr uint64_t kMinIoBytes = 4096;
  static constexpr double kMinWakeupsPerS = 50;

  // `now`: seconds on a steady clock.
  void Observe(double now, const ProcessActivity& activity, int64_t progress);
  // Seconds since the last sign of work (0 before the second reading).
  double idle_s(double now) const { return seen_ ? now - active_since_ : 0; }

 private:
  bool seen_ = false;
  double last_now_ = 0;
  double active_since_ = 0;
  ProcessActivity last_;
  int64_t last_progress_ = 0;
};

}  // namespace dlh
