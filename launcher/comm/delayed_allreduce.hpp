// DLH — the sums of stale-synchronous training (SyncSpec in common/spec.hpp): each step's
// gradients and control values go into non-blocking allreduces the moment backward ends, and
// the trainer takes them back, oldest first, up to `staleness` steps later
// (launcher/train/trainer_stale.cpp). A rank waits only for a step every rank has posted, so
// it runs at most `staleness` steps ahead of the slowest.
//
// Where MPI grants MPI_THREAD_MULTIPLE (training asks for it, mpi::Env), a thread of its own
// starts each step's allreduces, in posting order, on a communicator of its own, and tests them
// while the main thread computes. Without it, MPI_Iallreduce on the main thread, tested by
// poke() after forward and after backward. On a 100 Mbit/s link neither overlapped the sums
// with the compute at first (make bench, 2026-11-30: 457-469 samples/s against 548-565
// synchronously), also after the thread's sums moved to a ring of their own (ring_sum.hpp).
// The cause, found 2026-12-01: each message above the TCP eager limit waited for a rendezvous
// answer queued behind the other direction's data. In pieces under the limit the ring's sums
// run at the link's rate (ring_sum.hpp has the figures).
#pragma once

#include <mpi.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
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
    std::vector<MPI_Request> requests;  // without the thread: the gradient's pieces, the control
    bool summed = false;                // with the thread (under its lock)
  };

  // `gradient_values` floats and `control->size()` doubles per step; `control` and `comm`
  // must outlive this object. Collective over `comm` (the thread's communicator is a copy).
  DelayedAllreduce(MPI_Comm comm, size_t gradient_values, const SumMaxAllreduce* control);
  // Waits for what is still in flight: MPI must not write into freed buffers. Only an error
  // unwinding the run leaves anything, and the run then ends (the thread is then left to it).
  ~DelayedAllreduce();

  // Whether the sums run on a thread of their own (MPI_THREAD_MULTIPLE).
  bool threaded() const { return worker_.joinable(); }
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
  void wait(Entry* e);
  void work();  // the thread: each queued entry's allreduces, in order

  MPI_Comm comm_;
  MPI_Comm thread_comm_ = MPI_COMM_NULL;  // the thread's own copy of comm_
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Entry*> queue_;  // posted, not yet taken by the thread (entries stay in active_)
  bool stopping_ = false;
  std::exception_ptr failure_;  // the thread's MPI error, raised on the main thread
  size_t gradient_values_;
  const SumMaxAllreduce* control_;
  std::deque<std::unique_ptr<Entry>> active_;
  // Entries whose sums were taken, kept for their memory: fresh pages every step would cost
  // a page fault per 4 KiB (tens of microseconds each on a VM).
  std::vector<std::unique_ptr<Entry>> free_;
};

}  // namespace dlh
