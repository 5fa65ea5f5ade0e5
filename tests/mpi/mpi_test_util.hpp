// Helpers shared by the MPI tests (run under mpirun).
#pragma once

#include <mpi.h>

namespace dlh::test {

inline int Rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int Size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace dlh::test
