// DLH estimator — the batch balancing at the heart of the recommender's mixes (BalanceBatch's
// core, on plain arrays so that the enumeration allocates nothing). Inline in this header
// because the enumeration calls it for every mixed candidate: compiled into candidates.cpp it
// is specialised for its two groups (called in another file, it made Recommend about 8%
// slower on RecommendPerformance).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "estimator/recommend/recommend_detail.hpp"

namespace dlh::recommend_detail {

// The integer search of BalanceCore: per-group batches in [lo, cap[g]] using as many of
// `total` samples as possible, then with the earliest slowest finish. Groups are taken in
// decreasing count; the last (smallest count) takes what is left, up to its cap.
struct IntegerSearch {
  const double* fixed;
  const double* per;
  const int* count;
  const int64_t* cap;
  int64_t lo = 0;
  int order[kMaxGroups];
  int m = 0;
  int64_t after_lo[kMaxGroups], after_cap[kMaxGroups];  // samples of the later groups
  int64_t b[kMaxGroups] = {}, best[kMaxGroups] = {};
  int64_t best_used = -1;
  double best_finish = 0;
  long budget = 200000;

  void Prepare() {
    int64_t sl = 0, sc = 0;
    for (int d = m - 1; d >= 0; --d) {
      after_lo[d] = sl;
      after_cap[d] = sc;
      sl += count[order[d]] * lo;
      sc += count[order[d]] * cap[order[d]];
    }
  }

  void Run(int d, int64_t rest, int64_t used) {
    const int g = order[d];
    const int64_t c = count[g];
    if (d == m - 1) {
      b[g] = std::min(cap[g], rest / c);
      if (b[g] >= lo) Leaf(used + c * b[g]);
      return;
    }
    const int64_t hi = std::min(cap[g], (rest - after_lo[d]) / c);
    if (hi < lo) return;
    // Below `need` the later groups sit at their caps and the total only falls.
    int64_t low = lo;
    const int64_t need = rest - after_cap[d];
    if (need > 0) low = std::max(low, (need + c - 1) / c);
    low = std::min(low, hi);
    for (int64_t v = hi; v >= low && budget > 0; --v) {
      b[g] = v;
      Run(d + 1, rest - c * v, used + c * v);
    }
  }

  void Leaf(int64_t used) {
    --budget;
    if (used < best_used) return;
    double finish = 0;
    for (int i = 0; i < m; ++i) {
      const int g = order[i];
      finish = std::max(finish, fixed[g] + per[g] * double(b[g]));
    }
    if (used > best_used || finish < best_finish) {
      best_used = used;
      best_finish = finish;
      for (int i = 0; i < m; ++i) best[order[i]] = b[order[i]];
    }
  }
};

// The balancing of BalanceBatch on plain arrays (n <= kMaxGroups, per[g] > 0), so that the
// recommender's inner loop allocates nothing. Writes out[g]; sum count*out <= total.
inline void BalanceCore(const double* fixed, const double* per, const int* count, int n,
                        int64_t total, int64_t* out) {
  int64_t gpus = 0;
  for (int g = 0; g < n; ++g) gpus += std::max(0, count[g]);
  const int64_t lo = total >= gpus ? 1 : 0;  // every GPU gets one when possible

  // Equal finish time T over the active groups: sum c (T - f) / p = B. Groups whose batch
  // would fall below the floor are pinned there and T is solved again for the rest
  // (water filling: T only decreases, so pinned groups stay pinned).
  bool active[kMaxGroups];
  int64_t rest = total;
  for (int g = 0; g < n; ++g) active[g] = count[g] > 0;
  double t = 0;
  for (;;) {
    double s1 = 0, s0 = 0;
    for (int g = 0; g < n; ++g)
      if (active[g]) {
        s1 += count[g] / per[g];
        s0 += count[g] * fixed[g] / per[g];
      }
    if (s1 == 0) break;
    t = (double(rest) + s0) / s1;
    bool pinned = false;
    for (int g = 0; g < n; ++g)
      if (active[g] && (t - fixed[g]) / per[g] < double(lo)) {
        active[g] = false;
        rest -= count[g] * lo;
        pinned = true;
      }
    if (!pinned) break;
  }

  // Whole batches: nobody may finish later than T plus one sample of the GPU that is slowest
  // per sample (each group can then take at least the real batch rounded up); within that,
  // use as many samples as possible, then finish as early as possible.
  double slowest_sample = 0;
  for (int g = 0; g < n; ++g)
    if (count[g] > 0) slowest_sample = std::max(slowest_sample, per[g]);
  const double limit = t + slowest_sample;
  int64_t cap[kMaxGroups];
  IntegerSearch s;
  s.fixed = fixed;
  s.per = per;
  s.count = count;
  s.cap = cap;
  s.lo = lo;
  for (int g = 0; g < n; ++g) {
    out[g] = 0;
    if (count[g] <= 0) continue;
    cap[g] = lo;
    if (active[g]) {
      const double most = std::floor((limit - fixed[g]) / per[g] + 1e-9);
      cap[g] = std::max<int64_t>(lo, most >= double(total) ? total : int64_t(most));
    }
    s.order[s.m++] = g;
  }
  if (s.m == 0) return;
  std::sort(s.order, s.order + s.m,
            [&](int a, int b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
  s.Prepare();
  s.Run(0, total, 0);
  if (s.best_used < 0) {  // cannot happen (the floors of the real batches qualify)
    for (int i = 0; i < s.m; ++i) out[s.order[i]] = lo;
    return;
  }
  for (int i = 0; i < s.m; ++i) out[s.order[i]] = s.best[s.order[i]];
}

}  // namespace dlh::recommend_detail
