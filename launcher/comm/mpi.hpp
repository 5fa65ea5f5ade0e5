// DLH — MPI RAII owners and the checked-call macro. Communicators we own are duplicated
// and set to MPI_ERRORS_RETURN so that MPI_CHECK sees failures instead of MPI aborting.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "launcher/watch/peer_watch.hpp"

namespace dlh {

// Every checked call may wait for peers, so each is timed by the stall watchdog
// (peer_watch.hpp); when no watchdog runs that costs one relaxed atomic load.
#define MPI_CHECK(call)                                   \
  do {                                                    \
    ::dlh::PeerWait dlh_peer_wait_(#call);                \
    ::dlh::mpi::Check((call), #call, __FILE__, __LINE__); \
  } while (0)

namespace mpi {

void Check(int code, const char* call, const char* file, int line);

// MPI counts are ints: a longer buffer goes in messages (or calls) of at most this many values.
constexpr size_t kMaxMessageValues = size_t(1) << 30;

// MPI_Init_thread / MPI_Finalize. The main thread calls MPI (FUNNELED: the data loader's
// prefetch thread never does); training asks for MPI_THREAD_MULTIPLE, so that stale-synchronous
// training's sums can run on a thread of their own (delayed_allreduce.hpp) beside it.
class Env {
 public:
  Env(int* argc, char*** argv, int required = MPI_THREAD_FUNNELED);
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
};

// Whether MPI_Init_thread granted MPI_THREAD_MULTIPLE (Env).
bool ThreadMultiple();

// A duplicated communicator, freed on destruction.
class Comm {
 public:
  explicit Comm(MPI_Comm parent);
  Comm(Comm&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm();
  MPI_Comm get() const { return comm_; }
  int rank() const;
  int size() const;
  // MPI_Comm_split of `parent`; MPI_UNDEFINED as color gives a null Comm (get() is
  // MPI_COMM_NULL). Collective over `parent`.
  static Comm split(MPI_Comm parent, int color, int key);

 private:
  Comm() = default;
  friend Comm SplitShared(const Comm& parent);
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// The ranks of `parent` that share this node's memory.
Comm SplitShared(const Comm& parent);

std::string Hostname();     // SLURMD_NODENAME under Slurm, else gethostname()
std::string MachineName();  // gethostname(): the machine, whatever Slurm calls the node
// rank 0's string on every rank.
std::string BroadcastString(MPI_Comm comm, const std::string& value);
// Every rank's string, in rank order, on every rank.
std::vector<std::string> AllGatherStrings(MPI_Comm comm, const std::string& mine);

}  // namespace mpi
}  // namespace dlh
