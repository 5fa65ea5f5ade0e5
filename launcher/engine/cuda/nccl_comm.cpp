// DLH — the non-blocking NCCL communicator (see nccl_comm.hpp).
#include "launcher/engine/cuda/nccl_comm.hpp"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "launcher/comm/mpi.hpp"
#include "launcher/engine/cuda/check.hpp"
#include "launcher/watch/peer_watch.hpp"

namespace dlh {
namespace cuda {

std::string NcclAsyncProblem(ncclComm_t c) {
  if (c == nullptr) return "";
  ncclResult_t async = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(c, &async);
  if (asked != ncclSuccess)
    return std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(asked);
  if (async == ncclSuccess || async == ncclInProgress) return "";
  return ncclGetErrorString(async);
}

NcclComm::NcclComm(MPI_Comm comm, double deadline_s) : deadline_s_(deadline_s) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, comm));
  // Every rank has the id before any enters NCCL's initialisation: with Mellanox HCOLL a
  // broadcast still completing on one rank while its peers sit in NCCL's own bootstrap is a
  // known deadlock, and the barrier costs once per communicator.
  MPI_CHECK(MPI_Barrier(comm));
  // Non-blocking: a peer that never joins (dead, stopped, unreachable) cannot hang this rank
  // inside NCCL's bootstrap; settle() polls under the deadline and aborts.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&c, size_, id, rank_, &config);
  comm_ = PeerComm<NcclOps>(c);
  if (started != ncclInProgress) NCCL_CHECK(started);
  settle("ncclCommInitRankConfig (joining the NCCL communicator)");
}

void NcclComm::settle(const char* what) {
  using Clock = std::chrono::steady_clock;
  PeerWait watched(what);
  const auto deadline = Clock::now() + std::chrono::duration<double>(deadline_s_);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      comm_.abort();
      throw GpuCommError(std::string(what) + ": NCCL reports " + ncclGetErrorString(state) +
                         " (a peer rank failed?); communicator aborted");
    }
    if (Clock::now() > deadline) {
      comm_.abort();
      throw GpuCommError(std::string(what) + " did not finish within " +
                         std::to_string(int(deadline_s_)) +
                         " s: a peer rank failed or stalled; communicator aborted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void NcclComm::enqueued(ncclResult_t result, const char* call) {
  if (result == ncclInProgress)
    settle(call);
  else
    NCCL_CHECK(result);
}

}  // namespace cuda
}  // namespace dlh
