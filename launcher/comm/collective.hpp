// DLH — running a setup step on every rank and failing together.
//
// If a step (load the spec, the data, a checkpoint) fails on any rank, every rank throws
// the same error (the one of the lowest failing rank) instead of the others hanging in
// the next collective call. The error keeps the exit code of the original type.
#pragma once

#include <mpi.h>

#include <functional>

#include "common/error.hpp"
#include "common/exit_codes.hpp"

namespace dlh {

// Thrown identically on every rank by RunCollectively; rank 0 reports it.
struct CollectiveError : Error {
  CollectiveError(const std::string& message, int code) : Error(message), exit_code(code) {}
  int exit_code;
};

// Maps an exception to its dlh-launch exit code (common/exit_codes.hpp): bad input 2,
// checkpoint 3, anything else 1.
int ExitCodeOf(const std::exception& e);

void RunCollectively(MPI_Comm comm, const std::function<void()>& step);

}  // namespace dlh
