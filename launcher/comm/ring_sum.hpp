// DLH — a sum of floats over a communicator as a ring of non-blocking point-to-point messages
// (reduce-scatter, then all-gather: each rank sends and receives 2 (P - 1) / P of the buffer,
// the least any allreduce can), advanced by test() from a thread that sleeps between tests.
//
// Why not MPI_Iallreduce: Open MPI's non-blocking collectives (coll/libnbc) choose a binomial
// reduce-then-broadcast for fewer than 4 ranks or an in-place buffer, which moves the whole
// buffer twice through the root's link, one direction at a time. On a 100 Mbit/s link it took
// 232 ms a step where the blocking allreduce took 188 (make bench, 2026-11-30T0457Z). The ring
// halves what one link carries one way, yet measured no faster there (233 ms a step, 469
// samples/s against 465; 2026-11-30T0707Z): the bytes were not the bound. Nor, measured
// 2026-11-30 on the same shaped link, is the polling: tests every 0, 10, 100 or 1000 us, one
// swap of the whole buffers for two ranks instead of the ring's two rounds, Open MPI's send
// pipeline depth, fragment and socket buffer sizes, and a 20 ms queue instead of 200 all left
// the trainer's sums at 240-275 ms a step, also at batch 8 (no compute to compete with). A
// test program on that link settles it: one exchange of 1.7 MB each way, polled from a thread
// or by MPI_Allreduce, takes 145-168 ms after an idle link, but 262-275 ms when exchanges follow
// each other back to back, MPI_Allreduce's too. Stale-synchronous training keeps the link busy
// without a pause, synchronous training leaves it idle during each step's compute: on this
// emulated link (tc tbf on both ends of a veth pair) traffic both ways at once runs at about
// half the rate of traffic after a pause. The sums run as fast as the link lets them.
//
// Every rank ends with the same bits: each segment is summed once, along the ring in a fixed
// order (its owner's value first), and then copied around it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace dlh {

class RingSum {
 public:
  explicit RingSum(MPI_Comm comm);  // comm must outlive this object
  RingSum(const RingSum&) = delete;
  RingSum& operator=(const RingSum&) = delete;
  // Waits for a sum still in flight: MPI must not write into a freed buffer.
  ~RingSum();

  // Starts summing `count` floats at `data` in place; `data` must stay put until test() says
  // done. Not collective in itself: every rank of comm starts one, in the same order.
  void start(float* data, size_t count);
  // Moves the sum on as far as it can without waiting; true once `data` holds the sum.
  bool test();

 private:
  size_t segment_begin(int segment) const;
  void post_round();    // the messages of round_
  void finish_round();  // adds what came in (reduce-scatter rounds)

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  float* data_ = nullptr;
  size_t count_ = 0;
  int round_ = 0, rounds_ = 0;  // 2 (P - 1) rounds: P - 1 reduce-scatter, P - 1 all-gather
  std::vector<float> incoming_;
  std::vector<MPI_Request> requests_;
};

}  // namespace dlh
