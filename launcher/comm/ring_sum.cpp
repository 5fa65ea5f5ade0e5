// DLH — a ring sum of non-blocking point-to-point messages (ring_sum.hpp).
#include "launcher/comm/ring_sum.hpp"

#include <algorithm>
#include <exception>

#include "launcher/comm/mpi.hpp"

namespace dlh {
namespace {

int Modulo(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

RingSum::RingSum(MPI_Comm comm) : comm_(comm) {
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
}

RingSum::~RingSum() {
  // Unwinding from an error, a peer may be gone and a wait never end: the run ends anyway.
  if (std::uncaught_exceptions() > 0) return;
  for (MPI_Request& r : requests_)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
}

size_t RingSum::segment_begin(int segment) const {
  return count_ / size_t(size_) * size_t(segment) +
         std::min(size_t(segment), count_ % size_t(size_));
}

void RingSum::start(float* data, size_t count) {
  data_ = data;
  count_ = count;
  round_ = 0;
  rounds_ = size_ > 1 ? 2 * (size_ - 1) : 0;
  incoming_.resize(count_ / size_t(size_) + 1);
  if (rounds_ > 0) post_round();
}

// Round k < P - 1 (reduce-scatter): send segment rank - k to the right, take segment
// rank - k - 1 from the left and add it. After P - 1 rounds a rank holds the whole sum of
// segment rank + 1. Round P - 1 + k (all-gather): send segment rank + 1 - k, receive segment
// rank - k in place.
void RingSum::post_round() {
  const int right = Modulo(rank_ + 1, size_), left = Modulo(rank_ - 1, size_);
  const bool gather = round_ >= size_ - 1;
  const int k = gather ? round_ - (size_ - 1) : round_;
  const int out = Modulo(gather ? rank_ + 1 - k : rank_ - k, size_);
  const int in = Modulo(gather ? rank_ - k : rank_ - k - 1, size_);
  float* const into = gather ? data_ + segment_begin(in) : incoming_.data();
  const size_t in_count = segment_begin(in + 1) - segment_begin(in);
  const size_t out_count = segment_begin(out + 1) - segment_begin(out);
  requests_.clear();
  // Every receive first, then the sends, each in pieces of at most kPieceValues: one tag, so
  // the pieces match in order (MPI's messages between two ranks on one tag do not overtake).
  for (size_t at = 0; at < in_count; at += kPieceValues) {
    requests_.push_back(MPI_REQUEST_NULL);
    MPI_CHECK(MPI_Irecv(into + at, int(std::min(kPieceValues, in_count - at)), MPI_FLOAT, left, 0,
                        comm_, &requests_.back()));
  }
  const float* from = data_ + segment_begin(out);
  for (size_t at = 0; at < out_count; at += kPieceValues) {
    requests_.push_back(MPI_REQUEST_NULL);
    MPI_CHECK(MPI_Isend(from + at, int(std::min(kPieceValues, out_count - at)), MPI_FLOAT, right, 0,
                        comm_, &requests_.back()));
  }
}

void RingSum::finish_round() {
  if (round_ >= size_ - 1) return;  // all-gather: received in place
  const int in = Modulo(rank_ - round_ - 1, size_);
  float* segment = data_ + segment_begin(in);
  const size_t n = segment_begin(in + 1) - segment_begin(in);
  // The incoming partial sum first, then this rank's value: the order along the ring.
  for (size_t i = 0; i < n; ++i) segment[i] = incoming_[i] + segment[i];
}

bool RingSum::test() {
  while (round_ < rounds_) {
    int done = 0;
    MPI_CHECK(MPI_Testall(int(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (!done) return false;
    finish_round();
    if (++round_ < rounds_) post_round();
  }
  requests_.clear();
  return true;
}

}  // namespace dlh
