// DLH — MPI wrappers (see mpi.hpp).
#include "launcher/comm/mpi.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace dlh {
namespace mpi {

void Check(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw MpiError(std::string("MPI call failed: ") + call + " (" + file + ":" +
                 std::to_string(line) + "): " + std::string(text, size_t(len)));
}

Env::Env(int* argc, char*** argv, int required) {
  int provided = 0;
  MPI_CHECK(MPI_Init_thread(argc, argv, required, &provided));
  SetPeerWatchMpiReady();
}

// Asked of MPI, not remembered from Env: whoever initialized it (the MPI tests' own main).
bool ThreadMultiple() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided >= MPI_THREAD_MULTIPLE;
}

Env::~Env() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    // Timed like every other call that waits for peers (the watch is still on, see
    // FinishPeerWatch); not MPI_CHECK: a destructor does not throw.
    PeerWait wait("MPI_Finalize()");
    MPI_Finalize();
  }
  StopPeerWatch();
}

Comm::Comm(MPI_Comm parent) {
  MPI_CHECK(MPI_Comm_dup(parent, &comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

Comm::~Comm() {
  if (comm_ != MPI_COMM_NULL) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
}

int Comm::rank() const {
  int r = 0;
  MPI_CHECK(MPI_Comm_rank(comm_, &r));
  return r;
}

int Comm::size() const {
  int s = 0;
  MPI_CHECK(MPI_Comm_size(comm_, &s));
  return s;
}

Comm Comm::split(MPI_Comm parent, int color, int key) {
  Comm c;
  MPI_CHECK(MPI_Comm_split(parent, color, key, &c.comm_));
  if (c.comm_ != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_set_errhandler(c.comm_, MPI_ERRORS_RETURN));
  return c;
}

Comm SplitShared(const Comm& parent) {
  Comm c;
  MPI_CHECK(MPI_Comm_split_type(parent.get(), MPI_COMM_TYPE_SHARED, parent.rank(), MPI_INFO_NULL,
                                &c.comm_));
  MPI_CHECK(MPI_Comm_set_errhandler(c.comm_, MPI_ERRORS_RETURN));
  return c;
}

std::string Hostname() {
  // Slurm's node name first: several virtual nodes (slurmd -N) may share one host.
  if (const char* node = std::getenv("SLURMD_NODENAME"); node && *node) return node;
  return MachineName();
}

std::string MachineName() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

std::vector<std::string> AllGatherStrings(MPI_Comm comm, const std::string& mine) {
  int size = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  int len = int(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[size_t(r)] = total;
    total += lens[size_t(r)];
  }
  std::vector<char> all(size_t(std::max(total, 1)));
  MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                           MPI_CHAR, comm));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r)
    out.emplace_back(all.data() + displs[size_t(r)], size_t(lens[size_t(r)]));
  return out;
}

std::string BroadcastString(MPI_Comm comm, const std::string& value) {
  long long len = (long long)value.size();
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, comm));
  std::string out = value;
  out.resize(size_t(len));
  if (len > 0) MPI_CHECK(MPI_Bcast(out.data(), int(len), MPI_CHAR, 0, comm));
  return out;
}

}  // namespace mpi
}  // namespace dlh
