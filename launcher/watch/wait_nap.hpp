// DLH — a rank that has waited a second in one MPI call naps between polls instead of
// yielding its core.
//
// Open MPI polls for messages in a busy loop; with mpi_yield_when_idle (core_yield.hpp sets it
// on an oversubscribed node) it calls sched_yield between polls. Linux gives a yielded core
// only to a thread of the same scheduling group, and with autogroup every session is a group
// of its own: each Slurm job step, each job started with setsid. So a rank waiting for a
// frozen or hung peer (up to --comm-timeout and its grace, 75 s at the defaults) kept its core
// against every other job on the node (2026-12-06, alone on a 2-core machine: a test of three
// such stalls, tests/scripts/stall_defaults.sh, took 204 CPU-seconds in 104 s, both cores for
// its whole run; 40 in 74 s with the nap).
//
// dlh-launch therefore defines sched_yield itself (launcher/module.mk exports the symbol, so
// that the MPI libraries it loads call this one): once the main thread has waited in one call
// for kNapAfterWaitS, a poll sleeps kWaitNap instead of yielding. A step's ordinary waits are
// shorter and yield as before, so no timed step changes; a peer that answers after a long wait
// is seen at most kWaitNap late. Where Open MPI does not yield (a core per thread), nothing
// changes either: the rank keeps its own core.
#pragma once

#include <chrono>
#include <cstdint>

namespace dlh {

constexpr double kNapAfterWaitS = 1.0;
constexpr std::chrono::microseconds kWaitNap{1000};

// The naps this process took instead of a yield (tests).
int64_t WaitNapsTaken();

}  // namespace dlh
