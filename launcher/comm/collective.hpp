// DLH — running a setup step on every rank and failing together.
//
// If a step (load the spec, the data, a checkpoint) fails on any rank, every rank throws
// the same error (the one of the lowest failing rank) instead of the others hanging in
// the next collective call. The error keeps the exit code of the original type.
#pragma once

#include <mpi.h>

#include <functional>

#include "common/error.hpp"

namespace dlh {

// Exit codes of dlh-launch (README "Exit codes").
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;     // runtime failure (I/O, MPI, internal)
constexpr int kExitBadInput = 2;    // bad option, spec or data set
constexpr int kExitCheckpoint = 3;  // checkpoint cannot be read or written

// Thrown identically on every rank by RunCollectively; rank 0 reports it.
struct CollectiveError : Error {
  CollectiveError(const std::string& message, int exit_code)
      : Error(message), exit_code(exit_code) {}
  int exit_code;
};

// Maps an exception to its exit code.
int ExitCodeOf(const std::exception& e);

void RunCollectively(MPI_Comm comm, const std::function<void()>& step);

}  // namespace dlh
