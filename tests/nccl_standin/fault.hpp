// DLH NCCL stand-in — faults injected on request, to test that a stalled or failed rank ends
// a job, quickly and with the rank named.
//
//   DLH_NCCL_STANDIN_FAULT=KIND:RANK:CALL   at this process's CALL-th collective (1-based,
//                                           counted over all its communicators), on the
//                                           process of rank RANK (OMPI_COMM_WORLD_RANK,
//                                           PMIX_RANK or SLURM_PROCID)
//   KIND  stop   the process stops itself (SIGSTOP), as a frozen node would
//         hang   the collective never ends (until the communicator is aborted): a link down
//         error  the collective fails: the communicator's asynchronous error becomes
//                ncclSystemError, and its peers are left waiting, as with a crashed GPU
#pragma once

#include <string>

namespace dlh::nccl_standin {

struct Fault {
  enum Kind { None, Stop, Hang, Error } kind = None;
  int rank = -1;
  long call = 0;
};

// Throws std::runtime_error naming the variable and what is wrong with `text`.
Fault ParseFault(const std::string& text);
// This process's rank as its MPI launcher set it, or -1.
int ProcessRank();

}  // namespace dlh::nccl_standin
