// DLH — adaptive batch balancing (see balancer.hpp).
#include "launcher/train/balancer.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/error.hpp"

namespace dlh {
namespace {

void Check(bool ok, const std::string& what) {
  if (!ok) throw Error("balancer: " + what + " (internal error)");
}

void CheckInputs(const BalancerConfig& c, const std::vector<RankTiming>& current) {
  Check(!current.empty(), "no ranks");
  Check(c.damping > 0 && c.damping <= 1, "damping must be in (0, 1]");
  Check(c.max_move > 0 && c.max_move <= 1, "max_move must be in (0, 1]");
  Check(c.dead_band >= 0 && std::isfinite(c.dead_band), "dead_band must be >= 0");
  const int64_t n = int64_t(current.size());
  Check(c.global_batch >= n && c.max_batch >= 1 && c.max_batch <= c.global_batch &&
            c.max_batch >= (c.global_batch + n - 1) / n,
        "global_batch and max_batch cannot hold every rank");
  int64_t sum = 0;
  for (const RankTiming& t : current) {
    Check(t.batch >= 1 && t.batch <= c.max_batch, "a batch is outside [1, max_batch]");
    Check(std::isfinite(t.seconds) && t.seconds > 0, "a time is not finite and positive");
    sum += t.batch;
  }
  Check(sum == c.global_batch, "the batches do not sum to global_batch");
}

// The rate-proportional split, real-valued, inside [1, max_batch]: clamp(k * rate, 1, max)
// summing to the global batch. The sum grows with k (n at k = 0, n * max_batch for k large
// enough), so bisection finds k; every rank computes the same bits from the same inputs.
std::vector<double> ProportionalTarget(const BalancerConfig& c, const std::vector<double>& rates) {
  const size_t n = rates.size();
  auto split = [&](double k) {
    std::vector<double> t(n);
    for (size_t i = 0; i < n; ++i)
      t[i] = std::min(std::max(k * rates[i], 1.0), double(c.max_batch));
    return t;
  };
  auto sum = [](const std::vector<double>& t) { return std::accumulate(t.begin(), t.end(), 0.0); };
  double lo = 0, hi = double(c.max_batch) / *std::min_element(rates.begin(), rates.end());
  for (int i = 0; i < 200 && lo < hi; ++i) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    (sum(split(mid)) < double(c.global_batch) ? lo : hi) = mid;
  }
  return split(hi);
}

// Integers summing to `total` within one of `real` (which sums to it): floors, then one more
// to the largest fractional parts, ties to the lower rank, so every rank decides alike.
// lo/hi: integer bounds each result must keep, which `real` already keeps.
std::vector<int64_t> RoundKeepingSum(const std::vector<double>& real, int64_t total,
                                     const std::vector<int64_t>& lo,
                                     const std::vector<int64_t>& hi) {
  const size_t n = real.size();
  std::vector<int64_t> out(n);
  std::vector<double> frac(n);
  int64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = std::min(std::max(real[i], double(lo[i])), double(hi[i]));
    out[i] = int64_t(std::floor(x));
    frac[i] = x - double(out[i]);
    sum += out[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });
  // Rounding error can leave the floors a sample off either way; hand out or take back
  // samples where the bounds allow, largest fractions first.
  for (size_t k = 0; sum < total && k < 2 * n; ++k) {
    const size_t i = order[k % n];
    if (out[i] < hi[i]) ++out[i], ++sum;
  }
  for (size_t k = 0; sum > total && k < 2 * n; ++k) {
    const size_t i = order[n - 1 - k % n];
    if (out[i] > lo[i]) --out[i], --sum;
  }
  Check(sum == total, "rounding lost the global batch");
  return out;
}

// Damped moves of less than half a sample round to none, which would leave small batches
// out of balance for good (2, 2, 2, 2 with one rank far slower). Then one sample leaves the
// slowest rank for the rank the rule would give most, if that rank would still finish
// before the slowest does now: the step gets no slower, and the nudge cannot swing back.
void NudgeSlowest(const BalancerConfig& c, const std::vector<RankTiming>& current,
                  const std::vector<double>& move, BalanceDecision* d) {
  const size_t n = current.size();
  size_t slow = 0, gain = 0;
  for (size_t i = 1; i < n; ++i) {
    if (current[i].seconds > current[slow].seconds) slow = i;
    if (move[i] > move[gain]) gain = i;
  }
  if (slow == gain || move[slow] >= 0 || move[gain] <= 0 || current[slow].batch <= 1 ||
      current[gain].batch >= c.max_batch)
    return;
  if (double(current[gain].batch + 1) / d->rates[gain] >= current[slow].seconds) return;
  --d->batches[slow];
  ++d->batches[gain];
  d->changed = true;
}

}  // namespace

BalanceMode ParseBalanceMode(const std::string& text, const std::string& origin) {
  if (text == "off") return BalanceMode::Off;
  if (text == "adaptive") return BalanceMode::Adaptive;
  if (text == "replay") return BalanceMode::Replay;
  throw UsageError(origin + ": must be off, adaptive or replay, got '" + text + "'");
}

const char* BalanceModeName(BalanceMode mode) {
  return mode == BalanceMode::Adaptive ? "adaptive"
         : mode == BalanceMode::Replay ? "replay"
                                       : "off";
}

int64_t BalanceMaxBatch(int64_t global_batch, int ranks, const std::vector<int64_t>& start) {
  const int64_t n = std::max(ranks, 1);
  int64_t cap = 2 * ((global_batch + n - 1) / n);
  for (int64_t b : start) cap = std::max(cap, b);
  return std::max<int64_t>(1, std::min(cap, global_batch - (n - 1)));
}

BalanceDecision ProposeSplit(const BalancerConfig& c, const std::vector<RankTiming>& current) {
  CheckInputs(c, current);
  const size_t n = current.size();
  BalanceDecision d;
  d.rates.resize(n);
  d.batches.resize(n);
  double rate_sum = 0, slowest = 0;
  for (size_t i = 0; i < n; ++i) {
    d.batches[i] = current[i].batch;
    d.rates[i] = double(current[i].batch) / current[i].seconds;
    rate_sum += d.rates[i];
    slowest = std::max(slowest, current[i].seconds);
  }
  // With batches in proportion to the rates every rank would take global / sum of rates.
  d.imbalance = std::max(0.0, slowest * rate_sum / double(c.global_batch) - 1);
  if (d.imbalance <= c.dead_band) return d;

  const std::vector<double> target = ProportionalTarget(c, d.rates);
  // Damped, then every move scaled by the one factor that keeps each inside its bound.
  std::vector<double> move(n);
  std::vector<int64_t> lo(n), hi(n);
  double scale = 1;
  for (size_t i = 0; i < n; ++i) {
    const int64_t b = current[i].batch;
    move[i] = c.damping * (target[i] - double(b));
    const int64_t limit = std::max<int64_t>(1, int64_t(std::floor(c.max_move * double(b))));
    lo[i] = std::max<int64_t>(1, b - limit);
    hi[i] = std::min(c.max_batch, b + limit);
    if (std::fabs(move[i]) > double(limit))
      scale = std::min(scale, double(limit) / std::fabs(move[i]));
  }
  std::vector<double> next(n);
  for (size_t i = 0; i < n; ++i) next[i] = double(current[i].batch) + scale * move[i];
  d.batches = RoundKeepingSum(next, c.global_batch, lo, hi);
  for (size_t i = 0; i < n; ++i) d.changed = d.changed || d.batches[i] != current[i].batch;
  if (!d.changed) NudgeSlowest(c, current, move, &d);
  return d;
}

}  // namespace dlh
