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

// The ports the program's store is picked from: the 8192 (at most) just below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, first number `ephemeral_low`), never below
// 1024. Not from the ephemeral range itself, as torchrun does (bind to port 0): every
// bind(0) and connect() on the host draws from that range, so between the pick and the
// program's bind another job's MPI or PMIx listener may take the port, and rank 1 then talks
// to that listener ("Connection reset by peer", seen once in make check with six tests at a
// time). Below it only an explicit bind can collide. {0, 0} when the range starts too low to
// leave a band (the caller then binds port 0).
struct PortBand {
  int first = 0;
  int last = 0;  // inclusive
};
PortBand MasterPortBand(int ephemeral_low);

// The first number of /proc/sys/net/ipv4/ip_local_port_range, or Linux's default 32768
// where it cannot be read.
int EphemeralPortLow();

// A TCP port free on every interface of this host right now, from MasterPortBand (a random
// start, the next free one; bound and closed to check), else from port 0. Another process
// may still take it before the program binds it; the program then fails to start its store
// and says so. Throws Error when no socket can be bound.
int FreeTcpPort();

// 16 random hexadecimal digits: a run id when Slurm gives none (SLURM_JOB_ID).
std::string RandomRunId();

}  // namespace dlh
