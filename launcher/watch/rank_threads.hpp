// DLH — how many CPU engine threads a training rank takes when nothing else says: not
// --threads, not a plan, not OPENBLAS_NUM_THREADS.
//
// The CPUs of the rank's affinity mask, shared among this node's ranks that have the same
// mask. The rule before (the node's cores over its ranks) ignored binding: mpirun binds each
// of up to 2 ranks to a core, so a lone `mpirun -np 1 dlh-launch train` ran 2 threads on one
// core of this project's 2-core VMs (64-66 ms a step of the example spec, as at 1 thread;
// 2026-12-06), and under Slurm a rank of a job given 8 CPUs of a 64-core node would have
// started 64.
#pragma once

#include <mpi.h>

#include <string>

namespace dlh {

struct RankThreads {
  int threads = 1;
  int cpus = 1;     // this rank's affinity mask
  int online = 1;   // the node's CPUs
  int sharing = 1;  // this node's ranks with the same mask, this one included
};

// Collective over `world`: the rank's default thread count, max(1, cpus / sharing).
RankThreads DefaultRankThreads(MPI_Comm world);

// "1 CPU engine thread(s) per rank: 1 CPU in this rank's affinity mask of the node's 2 ..."
std::string RankThreadsText(const RankThreads& t);

}  // namespace dlh
