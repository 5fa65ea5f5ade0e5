// Helpers shared by the MPI tests (run under mpirun).
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "tests/util/temp_dir.hpp"

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

// A temp folder made by rank 0 and shared by all ranks; removed at the end.
class SharedDir {
 public:
  SharedDir() {
    char buf[4096] = {0};
    if (Rank() == 0) {
      // A failure must not skip the broadcast (the other ranks would hang): the path stays
      // empty and every rank's test fails instead.
      try {
        owner_.emplace("dlh-mpitest");
        std::snprintf(buf, sizeof buf, "%s", owner_->path().c_str());
      } catch (const std::exception&) {
      }
    }
    MPI_Bcast(buf, sizeof buf, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = buf;
  }
  // Every rank is done with the folder before rank 0's owner_ removes it.
  ~SharedDir() { MPI_Barrier(MPI_COMM_WORLD); }
  const std::string& path() const { return path_; }

 private:
  std::optional<TempDir> owner_;  // rank 0
  std::string path_;
};

}  // namespace dlh::test
