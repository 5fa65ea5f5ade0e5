// DLH — a sum kept in interleaved partial sums ("lanes"), shared by the convolution's bias
// gradient (conv2d.cpp, in float) and batch norm's statistics (batchnorm.cpp, in double).
#pragma once

#include <cstddef>

namespace dlh {

// One running sum is a chain of dependent adds (3-4 cycles each) that the compiler may not
// reorder; kLanes interleaved partial sums vectorise, and are added pairwise at the end.
// Which lane a term goes to depends only on its index within one add() call, so the total
// depends only on the lengths of the calls: never on threads or timing.
template <class Acc, int kLanes>
class LaneSum {
  static_assert(kLanes > 0 && (kLanes & (kLanes - 1)) == 0, "lanes are added pairwise");

 public:
  // Adds f(i) for i in [0, n): full rows of kLanes terms, then the rest from lane 0 on.
  template <class Term>
  void add(size_t n, Term&& f) {
    size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lane_[j] += f(i + j);
    for (int j = 0; i < n; ++i, ++j) lane_[j] += f(i);
  }

  Acc total() const {
    Acc t[kLanes];
    for (int j = 0; j < kLanes; ++j) t[j] = lane_[j];
    for (int width = kLanes / 2; width > 0; width /= 2)
      for (int j = 0; j < width; ++j) t[j] += t[j + width];
    return t[0];
  }

 private:
  Acc lane_[kLanes] = {};
};

}  // namespace dlh
