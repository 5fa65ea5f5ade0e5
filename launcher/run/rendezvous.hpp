// DLH — what rank 0 of `dlh-launch run` decides for the program's rendezvous (torch's
// "env://": rank 0's program serves a store on MASTER_ADDR:MASTER_PORT, the others connect)
// before broadcasting it. No MPI here.
#pragma once

#include <string>

namespace dlh {

// This machine's own host name (gethostname). Not mpi::Hostname(): that is Slurm's node name,
// which other hosts need not be able to resolve (slurmd -N runs several on one host), while
// the program's peers must reach this host by it.
std::string MachineHostName();

// A TCP port free on every interface of this host right now: bound to port 0, read, closed
// (as torchrun picks one). Another process may take it before the program binds it; the
// program then fails to start its store and says so. Throws Error when no socket can be bound.
int FreeTcpPort();

// 16 random hexadecimal digits: a run id when Slurm gives none (SLURM_JOB_ID).
std::string RandomRunId();

}  // namespace dlh
