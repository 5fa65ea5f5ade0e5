// DLH — an NCCL communicator that cannot hang its rank: non-blocking (ncclCommInitRankConfig
// with blocking = 0, NCCL 2.14+), joined and enqueued to under a deadline, aborted on an
// error or the deadline. Every wait here is a PeerWait, so the launcher's peer watch times it
// as it times an MPI call and names the rank that stopped answering.
//
// Only NCCL's API is used, no CUDA call: the same code runs against the NCCL stand-in
// (tests/nccl_standin/) on host memory in make check.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include "common/error.hpp"
#include "launcher/comm/peer_comm.hpp"

namespace dlh {
namespace cuda {

// A collective that stalled or whose peer failed, seen by this rank alone: not a
// CollectiveError (the kind every rank throws alike), so that dlh-launch names the rank and
// calls MPI_Abort instead of waiting in MPI_Finalize for the stalled peer.
struct GpuCommError : Error {
  using Error::Error;
};

struct NcclOps {
  using Handle = ncclComm_t;
  static bool async_error(ncclComm_t c) {
    ncclResult_t async = ncclSuccess;
    // A non-blocking communicator still at work (ncclInProgress) has not failed.
    return ncclCommGetAsyncError(c, &async) != ncclSuccess ||
           (async != ncclSuccess && async != ncclInProgress);
  }
  static void destroy(ncclComm_t c) { ncclCommDestroy(c); }
  static void abort(ncclComm_t c) { ncclCommAbort(c); }
};

// A failure NCCL reports for `c`, as a message ("" when none; ncclInProgress is none).
std::string NcclAsyncProblem(ncclComm_t c);

// A non-blocking NCCL communicator over the ranks of an MPI communicator (rank 0 makes the
// id). Joining it waits at most `deadline_s`; a failure or the deadline aborts it and throws
// GpuCommError.
class NcclComm {
 public:
  NcclComm(MPI_Comm comm, double deadline_s);
  ncclComm_t get() const { return comm_.get(); }
  int size() const { return size_; }
  int rank() const { return rank_; }
  void abort() { comm_.abort(); }  // kills queued and running operations; gone after
  // The result of enqueueing a collective: on a non-blocking communicator it may be
  // ncclInProgress, and nothing else may be enqueued until NCCL has finished enqueueing it.
  void enqueued(ncclResult_t result, const char* call);

 private:
  // Polls the asynchronous error until NCCL is no longer in progress (PeerWait `what`).
  void settle(const char* what);
  PeerComm<NcclOps> comm_;
  int size_ = 0, rank_ = 0;
  double deadline_s_;
};

}  // namespace cuda
}  // namespace dlh
