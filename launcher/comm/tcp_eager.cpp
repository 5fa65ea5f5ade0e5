// DLH — Open MPI's TCP eager limit raised to a gradient bucket (tcp_eager.hpp).
#include "launcher/comm/tcp_eager.hpp"

#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "launcher/comm/grad_sync.hpp"

namespace dlh {
namespace {

constexpr char kVariable[] = "OMPI_MCA_btl_tcp_eager_limit";

size_t raised = 0;

// A bucket size in MiB as --bucket-mb takes it; 0 for anything that is not a positive number.
size_t BytesOfMiB(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  const double mib = std::strtod(text, &end);
  if (*end != '\0' || !(mib > 0) || !std::isfinite(mib) || mib > 1e6) return 0;
  return size_t(mib * 1024 * 1024);
}

}  // namespace

size_t BucketBytesFromArguments(int argc, char** argv) {
  size_t bytes = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a == "--bucket-mb" && i + 1 < argc) bytes = BytesOfMiB(argv[i + 1]);
    if (a.rfind("--bucket-mb=", 0) == 0) bytes = BytesOfMiB(a.c_str() + 12);
  }
  return bytes ? bytes : GradSyncOptions{}.bucket_bytes;  // --bucket-mb's default
}

size_t RaiseTcpEagerLimit(size_t bucket_bytes) {
#ifndef OPEN_MPI
  (void)bucket_bytes;
  return 0;  // another MPI: its own transports, its own settings
#else
  if (std::getenv(kVariable)) return 0;
  const size_t limit = bucket_bytes + kTcpEagerHeaderRoom;
  if (setenv(kVariable, std::to_string(limit).c_str(), 1) != 0) return 0;
  raised = limit;
  return limit;
#endif
}

size_t TcpEagerLimitRaised() { return raised; }

size_t TcpEagerLimitInEffect() {
#ifndef OPEN_MPI
  return 0;
#else
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return 0;
  size_t value = 0;
  int index = 0, count = 0, verbosity = 0, bind = 0, scope = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_T_enum values = MPI_T_ENUM_NULL;
  MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
  if (MPI_T_cvar_get_index("btl_tcp_eager_limit", &index) == MPI_SUCCESS &&
      MPI_T_cvar_get_info(index, nullptr, nullptr, &verbosity, &type, &values, nullptr, nullptr,
                          &bind, &scope) == MPI_SUCCESS &&
      MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
    if (count == 1) {
      // Open MPI declares a size_t setting as one of these, by the platform's width.
      if (type == MPI_UNSIGNED_LONG) {
        unsigned long v = 0;
        if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) value = v;
      } else if (type == MPI_UNSIGNED_LONG_LONG) {
        unsigned long long v = 0;
        if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) value = size_t(v);
      } else if (type == MPI_INT || type == MPI_UNSIGNED) {
        unsigned v = 0;
        if (MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) value = v;
      }
    }
    MPI_T_cvar_handle_free(&handle);
  }
  MPI_T_finalize();
  return value;
#endif
}

}  // namespace dlh
