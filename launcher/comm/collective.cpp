// DLH — collective error agreement (see collective.hpp).
#include "launcher/comm/collective.hpp"

#include <climits>
#include <string>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "launcher/comm/mpi.hpp"

namespace dlh {
int ExitCodeOf(const std::exception& e) {
  if (auto* c = dynamic_cast<const CollectiveError*>(&e)) return c->exit_code;
  if (dynamic_cast<const SpecError*>(&e) || dynamic_cast<const DataError*>(&e) ||
      dynamic_cast<const UsageError*>(&e))
    return kExitBadInput;
  if (dynamic_cast<const CheckpointError*>(&e)) return kExitCheckpoint;
  return kExitFailure;
}

void RunCollectively(MPI_Comm comm, const std::function<void()>& step) {
  int code = kExitOk;
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    code = ExitCodeOf(e);
    message = e.what();
  }
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  int mine = code == kExitOk ? INT_MAX : rank, first = INT_MAX;
  MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == INT_MAX) return;
  MPI_CHECK(MPI_Bcast(&code, 1, MPI_INT, first, comm));
  long long len = (long long)message.size();
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_LONG_LONG, first, comm));
  message.resize(size_t(len));
  if (len > 0) MPI_CHECK(MPI_Bcast(message.data(), int(len), MPI_CHAR, first, comm));
  throw CollectiveError(message, code);
}

}  // namespace dlh
