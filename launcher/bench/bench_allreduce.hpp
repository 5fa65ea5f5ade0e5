// DLH — `dlh-launch bench-allreduce`: times DLH's gradient allreduce (fused buckets, the
// path training uses) against a plain MPI_Allreduce of the same bytes, alternating, and
// many small tensors fused against one call per tensor. Its JSON output calibrates the
// estimator's communication model (`dlh-estimate comm`) and feeds `make bench`.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dlh {

struct AllreduceBenchOptions {
  size_t min_bytes = 4 << 10;
  size_t max_bytes = size_t(64) << 20;
  int size_factor = 4;          // each size is this many times the previous one
  int repeats = 5;              // timed blocks per size and method; the median is reported
  double block_seconds = 0.05;  // target duration of one block
  int small_tensors = 256;      // fused-vs-per-tensor comparison: this many tensors ...
  size_t small_bytes = 4096;    // ... of this size each
};

// Collective. Returns the results (the same on every rank):
// {"ranks", "sizes": [{"bytes", "mpi_s", "dlh_s", "mpi_min_s", "mpi_max_s", "dlh_min_s",
//  "dlh_max_s"}], "small": {"tensors", "bytes_each", "per_tensor_s", "fused_s",
//  "per_tensor_min_s", "fused_min_s"}}; times are of the slowest rank per block, medians
//  unless the name says min or max (the blocks of the two sides alternate).
nlohmann::json RunAllreduceBench(MPI_Comm comm, const AllreduceBenchOptions& options);

}  // namespace dlh
