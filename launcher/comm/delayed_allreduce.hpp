// DLH — the sums of stale-synchronous training (SyncSpec in common/spec.hpp): each step's
// gradients and control values go into non-blocking allreduces the moment backward ends, and
// the trainer takes them back, oldest first, up to `staleness` steps later
// (launcher/train/trainer_stale.cpp). A rank waits only for a step every rank has posted, so
// it runs at most `staleness` steps ahead of the slowest.
//
// Only the main thread calls MPI (FUNNELED), and Open MPI moves a non-blocking collective on
// only inside MPI calls: poke() tests every request, and the trainer calls it a few times a
// step (after forward, after backward, at the exchange) so that the sums advance while the
// ranks compute.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "launcher/comm/control_reduce.hpp"

namespace dlh {

class DelayedAllreduce {
 public:
  struct Entry {
    int64_t step = 0;              // the cursor step (from 0) whose batch gave these sums
    std::vector<float> gradients;  // this rank's part until done, then the sum over ranks
    std::vector<double> control, control_sum;  // the control message, then its sums and maxes
    // False for an entry restored from a checkpoint: its control_sum holds the sums only, and
    // the flags (signals, checkpoints written: the run that wrote it) count as none.
    bool flags = true;
    std::vector<MPI_Request> requests;  // the gradient's pieces, then the control
  };

  // `gradient_values` floats and `control->size()` doubles per step; `control` and `comm`
  // must outlive this object.
  DelayedAllreduce(MPI_Comm comm, size_t gradient_values, const SumMaxAllreduce* control);
  // Waits for what is still in flight: MPI must not write into freed buffers. Only an error
  // unwinding the run leaves anything, and the run then ends.
  ~DelayedAllreduce();
  DelayedAllreduce(const DelayedAllreduce&) = delete;
  DelayedAllreduce& operator=(const DelayedAllreduce&) = delete;

  // Starts the sums of step `step` from copies of `gradients` and `control`.
  void post(int64_t step, const float* gradients, const double* control);
  // A summed entry put back in flight (a resume): the oldest first.
  void restore(int64_t step, const std::vector<float>& gradients, const std::vector<double>& sums);
  // Lets MPI move the outstanding sums on. Never blocks.
  void poke();
  // Waits until every entry in flight is summed (a checkpoint stores them).
  void complete_all();

  size_t in_flight() const { return active_.size(); }
  // Waits for the oldest entry and hands it over until release_oldest().
  const Entry& wait_oldest();
  void release_oldest();
  // Oldest first; complete_all() first for their sums.
  const std::deque<std::unique_ptr<Entry>>& entries() const { return active_; }

 private:
  std::unique_ptr<Entry> take_free();
  static void wait(Entry* e);

  MPI_Comm comm_;
  size_t gradient_values_;
  const SumMaxAllreduce* control_;
  std::deque<std::unique_ptr<Entry>> active_;
  // Entries whose sums were taken, kept for their memory: fresh pages every step would cost
  // a page fault per 4 KiB (tens of microseconds each on a VM).
  std::vector<std::unique_ptr<Entry>> free_;
};

}  // namespace dlh
