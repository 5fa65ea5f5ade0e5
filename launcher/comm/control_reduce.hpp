// DLH — one allreduce for a step's control values (launcher/train/trainer_step.cpp): the loss,
// the correct count and the batch-norm statistics are summed over the ranks, and the flags
// (a pending signal, a checkpoint due, the newest checkpoint written, a failed write) are
// maxed, in the same message. Two collectives a step cost two latencies, and each is a point
// where a GPU's host thread stands waiting (issue 43: one control allreduce per step).
//
// MPI has no built-in "sum these, max those", so this is a user-defined operation on a
// contiguous datatype of doubles, the first `sums` of which it adds and the rest it maxes.
// Flags travel as doubles: whole numbers up to 2^53 are exact.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace dlh {

class SumMaxAllreduce {
 public:
  // Messages of `sums` values to sum followed by `maxes` values to max.
  SumMaxAllreduce(size_t sums, size_t maxes);
  ~SumMaxAllreduce();
  SumMaxAllreduce(const SumMaxAllreduce&) = delete;
  SumMaxAllreduce& operator=(const SumMaxAllreduce&) = delete;

  size_t size() const { return sums_ + maxes_; }
  // out[0, sums) = sum over ranks of in[0, sums); out[sums, size()) = max over ranks.
  // Collective over `comm`; in and out hold size() values each.
  void run(const double* in, double* out, MPI_Comm comm) const;
  // The same, non-blocking (stale-synchronous training, delayed_allreduce.hpp): `out` holds
  // the result once `*request` completes; neither buffer may be touched before.
  void start(const double* in, double* out, MPI_Comm comm, MPI_Request* request) const;

 private:
  size_t sums_, maxes_;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Op op_ = MPI_OP_NULL;
};

}  // namespace dlh
