// DLH — a sum of floats over a communicator as a ring of non-blocking point-to-point messages
// (reduce-scatter, then all-gather: each rank sends and receives 2 (P - 1) / P of the buffer,
// the least any allreduce can), advanced by test() from a thread that sleeps between tests.
//
// Why not MPI_Iallreduce: Open MPI's non-blocking collectives (coll/libnbc) choose a binomial
// reduce-then-broadcast for fewer than 4 ranks or an in-place buffer, which moves the whole
// buffer twice through the root's link, one direction at a time. On a 100 Mbit/s link it took
// 232 ms a step where the blocking allreduce took 188 (make bench, 2026-11-30T0457Z).
//
// Why every message goes in pieces of at most kPieceValues: a message above the transport's
// eager limit (Open MPI's TCP: 64 KiB) waits for a rendezvous, the receiver's answer to its
// first fragment. On TCP that answer rides the one stream between the two ranks, behind the
// bulk data the receiver is itself sending the other way, so the two directions take turns
// instead of running at once. On the 100 Mbit/s link of make bench's local_sgd part (tc tbf
// on both ends of a veth pair), summing the 1.7 MB gradient of the example spec between two
// hosts, back to back (a test program, 8 sums a run, 2026-12-01): the ring in messages of a
// whole segment, polled every 100 us, took medians of 144-219 ms over four runs (up to 267),
// in pieces of 60 KB medians of 143-155 ms over six (up to 167), where the link's rate alone
// needs 135. Earlier sessions had measured the same halving, could not find its cause, and
// read it as the link ("traffic both ways at once runs at about half the rate"). In training
// (the example spec, staleness 2, steps after the 30th) the step went from 281 to 152-154 ms.
// Pieces cost a few more matched messages a round. dlh-launch also raises Open MPI's TCP eager
// limit to a bucket (tcp_eager.hpp), which alone gave the same; the pieces keep the ring
// independent of that setting, which a site may pin lower.
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
  // Floats per message: 60 KiB, under Open MPI's TCP eager limit with room for its header.
  static constexpr size_t kPieceValues = size_t(15) * 1024;

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
