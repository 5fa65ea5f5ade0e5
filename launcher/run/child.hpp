// DLH — the one program each rank of `dlh-launch run` starts, and how the rank follows it.
//
// The rank (an MPI process, after MPI_Init) forks and execs the program. Everything the
// child needs (argv, envp, the paths to try) is built before fork: between fork and exec the
// child makes only async-signal-safe calls, since another thread of the MPI library may have
// held a lock (malloc's, say) at the moment of the fork. The child dies with its rank
// (PR_SET_PDEATHSIG, SIGKILL), so a rank that mpirun or Slurm kills leaves no program behind.
// Whether exec worked is known for sure: the child writes errno to a close-on-exec pipe only
// when exec fails, and a successful exec closes the pipe empty.
//
// From the start on, the rank forwards SIGTERM, SIGINT, SIGUSR1, SIGUSR2 and SIGHUP to the
// program, as the rank guard forwards them to a training rank (launcher/watch/rank_guard.cpp).
// Note that mpirun (which signals a rank's process group) and Slurm (which signals every
// process of the step) may also deliver the same signal to the program directly.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace dlh {

// Where execvp would look for `file`, in order: `file` alone when it holds a '/', else each
// folder of `path` (PATH; an empty entry is the current folder; nullptr: "/bin:/usr/bin",
// glibc's default) joined with `file`.
std::vector<std::string> ExecCandidates(const std::string& file, const char* path);

struct Spawned {
  pid_t pid = -1;      // the program's pid while it runs; -1 when exec failed
  int exec_error = 0;  // errno of the failed exec (the child was already reaped); 0: it runs
};

// Starts `command` (CMD ARGS..., not empty) with environment `env` ("NAME=value") and begins
// forwarding the signals above to it. Of the rank's descriptors the program inherits stdin,
// stdout, stderr and `inherit_fd` (>= 0; the progress pipe's write end, progress.hpp), under
// the same number. Returns once the program runs or exec has failed. Call once. Throws Error
// when pipe or fork fail.
Spawned SpawnChild(const std::vector<std::string>& command, const std::vector<std::string>& env,
                   int inherit_fd = -1);

// Waits up to `wait_ms` for the program to end. True once it ended: `*wait_status` is its
// status (as waitpid gives it), the child is reaped and signals are no longer forwarded.
bool WaitChild(pid_t pid, int wait_ms, int* wait_status);

// Kills the program (SIGKILL) and reaps it: when the job ends before it properly started.
void KillChild(pid_t pid);

// The first SIGTERM, SIGINT or SIGHUP the rank received since SpawnChild (0: none): a stop
// asked for by the launcher or the user, which the program was told of.
int StopSignalReceived();

// The signals above the rank received (and passed on) since the last call, each once, in
// the order of the list above: for the run's "signal" records (run_records.hpp).
std::vector<int> TakeReceivedSignals();

// "exited with code 3", "was killed by SIGKILL", "was killed by SIGSEGV (core dumped)".
std::string DescribeEnd(int wait_status);

// The shell's exit code for a wait status: the code, or 128 + the signal.
int ExitCodeOfEnd(int wait_status);

// "SIGKILL" (glibc's abbreviation), else "signal N".
std::string SignalName(int signal);

}  // namespace dlh
