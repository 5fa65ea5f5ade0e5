// DLH — a rank that dies says so: each MPI rank of `dlh-launch train` runs as the child of a
// small guard process that never touches MPI (issue 15).
//
// Why a second process: a rank killed outright (SIGKILL by hand or by the kernel's
// out-of-memory killer) or crashed (SIGSEGV) cannot speak, and its peers cannot either:
// Open MPI prints its own "peer process has unexpectedly disconnected" and the launcher
// (mpirun's daemon, or Slurm's PMIx plugin) kills every other rank within about a second.
// The guard is the one process that outlives the rank: it sees the death at once (waitpid)
// and prints DLH's line naming the rank, its host and pid, the signal, the step and the last
// good checkpoint, which the rank kept in memory shared with the guard. Then it exits
// 128 + the signal, which the launcher reports and the example job script requeues on.
//
// The guard forwards the signals a launcher sends its task (SIGTERM, SIGINT, SIGUSR1,
// SIGUSR2, SIGHUP) to the rank, and the rank dies with its guard (PR_SET_PDEATHSIG), so
// mpirun and srun stop both as before. DLH_RANK_GUARD=0 turns the guard off.
#pragma once

#include <cstdint>
#include <string>

namespace dlh {

// Called before MPI_Init. When the process was started by an MPI launcher (Open MPI's or
// PMIx's rank variables are set) and DLH_RANK_GUARD is not 0, forks: the child returns and
// becomes the rank; the parent waits for it and exits with its exit code (never returns).
// Otherwise returns at once.
void GuardRank();

// What the guard names if the rank dies: the step it reached and its last good checkpoint.
// Cheap; no-ops without a guard.
void SetGuardedStep(int64_t step);
// What the rank is doing before its first step ("in MPI_Init", "loading the data"), named
// when it dies before one; `phase` must be a string literal (the guard reads the pointer).
void SetGuardedPhase(const char* phase);
void SetGuardedCheckpoint(const std::string& path);
// Where the guard writes what it saw when the rank died of a signal ({"rank", "signal",
// "culprit_nodes": [node]}, as a stall's verdict file has), for the job script to leave the
// node out of the requeued job. Set once the run folder exists; before that, nothing.
void SetGuardedReport(const std::string& path, const std::string& node);

// The guard's line for a rank that died of `signal`, e.g. "dlh-launch [rank 2/4 host2]:
// error: rank 2 (pid 4711) was killed by SIGKILL at step 1800; last good checkpoint ...;
// its peers cannot go on without it: the job ends". `step` < 0: before training started;
// `checkpoint` empty: none yet; `phase`: what it was doing before its first step, if known.
std::string RankDeathLine(int rank, int size, const std::string& host, long pid, int signal,
                          bool core_dumped, int64_t step, const std::string& checkpoint,
                          const std::string& phase = "");

}  // namespace dlh
