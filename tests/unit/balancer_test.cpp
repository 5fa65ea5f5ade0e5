// balancer_test — launcher/train/balancer.hpp: the adaptive split's pure rule. Known splits
// computed by hand, the invariants (sum, [1, max_batch], bounded moves) over many random
// inputs, convergence to the rate-proportional split on simulated ranks, no oscillation on
// ±30% noise, and every bad input refused.
#include "launcher/train/balancer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace dlh {
namespace {

BalancerConfig Config(int64_t global, int64_t max_batch) {
  BalancerConfig c;
  c.global_batch = global;
  c.max_batch = max_batch;
  return c;
}

// Ranks whose compute takes fixed_s + batch * per_sample_s, optionally with multiplicative
// noise in [1 - noise, 1 + noise] per step, measured as the median of `window` steps.
struct SimulatedRanks {
  std::vector<double> per_sample_s;
  double fixed_s = 0;
  double noise = 0;
  int window = 20;
  std::mt19937_64 rng{7};

  std::vector<RankTiming> measure(const std::vector<int64_t>& batches) {
    std::uniform_real_distribution<double> u(1 - noise, 1 + noise);
    std::vector<RankTiming> out;
    for (size_t r = 0; r < batches.size(); ++r) {
      std::vector<double> steps;
      for (int k = 0; k < window; ++k)
        steps.push_back((fixed_s + double(batches[r]) * per_sample_s[r]) *
                        (noise > 0 ? u(rng) : 1));
      out.push_back({batches[r], Median(steps)});
    }
    return out;
  }
  // The step's compute time without noise: the slowest rank's.
  double step_s(const std::vector<int64_t>& batches) const {
    double worst = 0;
    for (size_t r = 0; r < batches.size(); ++r)
      worst = std::max(worst, fixed_s + double(batches[r]) * per_sample_s[r]);
    return worst;
  }
};

// Iterates decisions from `start`; returns the split after `rounds` (or once it stays).
std::vector<int64_t> Decide(const BalancerConfig& c, SimulatedRanks* sim,
                            std::vector<int64_t> split, int rounds, int* changes = nullptr) {
  for (int i = 0; i < rounds; ++i) {
    const BalanceDecision d = ProposeSplit(c, sim->measure(split));
    if (changes) *changes += d.changed;
    split = d.batches;
  }
  return split;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

std::string ErrorOf(const BalancerConfig& c, const std::vector<RankTiming>& t) {
  try {
    ProposeSplit(c, t);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(BalancerTest, MedianOfOddEvenAndNone) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(Median({5}), 5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
  // One wild step (a checkpoint's page cache flush, a neighbour's burst) moves it not at all.
  EXPECT_DOUBLE_EQ(Median({0.1, 0.1, 0.1, 9.0, 0.1}), 0.1);
}

TEST(BalancerTest, EqualTimesKeepTheSplit) {
  const BalanceDecision d = ProposeSplit(Config(128, 127), {{96, 0.3}, {32, 0.3}});
  EXPECT_FALSE(d.changed);
  EXPECT_EQ(d.batches, (std::vector<int64_t>{96, 32}));
  EXPECT_DOUBLE_EQ(d.imbalance, 0);
  EXPECT_DOUBLE_EQ(d.rates[0], 320);
  EXPECT_NEAR(d.rates[1], 106.667, 1e-3);
}

// Rates 64 and 32 samples/s: the proportional split of 128 is 85.3 / 42.7; half way from
// 64 / 64 is 74.7 / 53.3, within the bound of 16 (25% of 64); rounded 75 / 53.
TEST(BalancerTest, MovesHalfWayToTheRateProportionalSplit) {
  const BalanceDecision d = ProposeSplit(Config(128, 127), {{64, 1.0}, {64, 2.0}});
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.batches, (std::vector<int64_t>{75, 53}));
  // The slowest rank takes 2 s; the ideal step is 128 / 96 = 1.333 s.
  EXPECT_NEAR(d.imbalance, 0.5, 1e-12);
}

// Rates 10:1: the damped move (26.2) is larger than 25% of 64, so it is cut to 16 samples.
TEST(BalancerTest, MoveIsBoundedByAQuarterOfTheBatch) {
  const BalanceDecision d = ProposeSplit(Config(128, 127), {{64, 0.1}, {64, 1.0}});
  EXPECT_EQ(d.batches, (std::vector<int64_t>{80, 48}));
  // Three ranks of equal rates (32 samples/s) from 32 / 32 / 8: the damped moves are -4, -4
  // and +8, but the small rank may take only 2 more (25% of 8), so every move is cut to a
  // quarter, which keeps the sum: 31 / 31 / 10.
  const BalanceDecision e = ProposeSplit(Config(72, 48), {{32, 1.0}, {32, 1.0}, {8, 0.25}});
  EXPECT_EQ(e.batches, (std::vector<int64_t>{31, 31, 10}));
}

TEST(BalancerTest, DeadBandIgnoresSmallImbalance) {
  // Slowest 0.52 s against an ideal of 2 * 64 / (64/0.48 + 64/0.52) = 0.4992 s: 4.2%.
  const BalanceDecision small = ProposeSplit(Config(128, 127), {{64, 0.48}, {64, 0.52}});
  EXPECT_NEAR(small.imbalance, 0.0417, 1e-3);
  EXPECT_FALSE(small.changed);
  // 0.47 / 0.53: 6%, outside the 5% band: one sample moves.
  const BalanceDecision large = ProposeSplit(Config(128, 127), {{64, 0.47}, {64, 0.53}});
  EXPECT_GT(large.imbalance, 0.05);
  EXPECT_EQ(large.batches, (std::vector<int64_t>{66, 62}));
  BalancerConfig wide = Config(128, 127);
  wide.dead_band = 0.1;
  EXPECT_FALSE(ProposeSplit(wide, {{64, 0.47}, {64, 0.53}}).changed);
}

TEST(BalancerTest, KeepsTheSumTheBoundsAndTheMoveLimitOnRandomInputs) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 20000; ++trial) {
    const int n = 1 + int(rng() % 9);
    const int64_t global = n + int64_t(rng() % 400);
    const int64_t lo_cap = (global + n - 1) / n;
    const int64_t max_batch = std::min(global - (n - 1), lo_cap + int64_t(rng() % 200));
    // A random split inside [1, max_batch] summing to global.
    std::vector<int64_t> split(size_t(n), 1);
    for (int64_t left = global - n; left > 0;) {
      const size_t r = size_t(rng() % size_t(n));
      if (split[r] < max_batch) --left, ++split[r];
    }
    std::vector<RankTiming> t;
    std::uniform_real_distribution<double> seconds(1e-4, 10);
    for (int64_t b : split) t.push_back({b, seconds(rng)});
    BalancerConfig c = Config(global, max_batch);
    c.damping = std::uniform_real_distribution<double>(0.05, 1)(rng);
    c.max_move = std::uniform_real_distribution<double>(0.01, 1)(rng);
    const BalanceDecision d = ProposeSplit(c, t);
    ASSERT_EQ(Sum(d.batches), global) << trial;
    for (int r = 0; r < n; ++r) {
      const int64_t b = split[size_t(r)], limit = std::max<int64_t>(1, int64_t(c.max_move * b));
      ASSERT_GE(d.batches[size_t(r)], 1) << trial;
      ASSERT_LE(d.batches[size_t(r)], max_batch) << trial;
      ASSERT_LE(std::abs(d.batches[size_t(r)] - b), limit) << trial;
    }
    ASSERT_EQ(d.changed, d.batches != split);
  }
}

TEST(BalancerTest, ConvergesToTheRateProportionalSplit) {
  // Per-sample costs 1, 2 and 4 ms: rates 4:2:1, so 112 splits 64 / 32 / 16.
  SimulatedRanks sim;
  sim.per_sample_s = {0.001, 0.002, 0.004};
  int changes = 0;
  const std::vector<int64_t> end = Decide(Config(112, 74), &sim, {38, 37, 37}, 30, &changes);
  EXPECT_EQ(Sum(end), 112);
  EXPECT_NEAR(double(end[0]), 64, 2);
  EXPECT_NEAR(double(end[1]), 32, 2);
  EXPECT_NEAR(double(end[2]), 16, 1);
  EXPECT_LE(changes, 12) << "damped and bounded, but not slow";
  // Then it stays: one more decision changes nothing.
  EXPECT_FALSE(ProposeSplit(Config(112, 74), sim.measure(end)).changed);
}

// With a fixed cost per step (launch latency, the part of backward that does not scale with
// the batch) the rate-proportional split is not the best one; iterating still equalises the
// times, to within the dead band.
TEST(BalancerTest, EqualisesTimesWithAFixedCostPerStep) {
  SimulatedRanks sim;
  sim.per_sample_s = {0.001, 0.003};
  sim.fixed_s = 0.05;
  const std::vector<int64_t> end = Decide(Config(256, 255), &sim, {128, 128}, 40);
  const double a = 0.05 + double(end[0]) * 0.001, b = 0.05 + double(end[1]) * 0.003;
  EXPECT_LE(std::max(a, b) / std::min(a, b), 1.06) << end[0] << " " << end[1];
  EXPECT_FALSE(ProposeSplit(Config(256, 255), sim.measure(end)).changed);
}

// ±30% per step, medians of 20: once near the ideal split the noise moves it a few samples
// either way, never far: every split after convergence is within 10% of the ideal step, and
// most decisions change nothing.
TEST(BalancerTest, NoiseDoesNotMakeItOscillate) {
  SimulatedRanks sim;
  sim.per_sample_s = {0.002, 0.005};  // ideal 128: 91.4 / 36.6
  sim.noise = 0.3;
  const BalancerConfig c = Config(128, 127);
  std::vector<int64_t> split = Decide(c, &sim, {64, 64}, 10);
  const double ideal = 128 / (1 / 0.002 + 1 / 0.005);
  int changes = 0;
  for (int i = 0; i < 200; ++i) {
    split = Decide(c, &sim, split, 1, &changes);
    ASSERT_LE(sim.step_s(split), 1.10 * ideal) << "round " << i << ": " << split[0];
    ASSERT_NEAR(double(split[0]), 91.4, 6) << "round " << i;
  }
  EXPECT_LT(changes, 100) << "the dead band holds most noisy windows";
}

TEST(BalancerTest, EveryRankKeepsAtLeastOneSample) {
  SimulatedRanks sim;
  sim.per_sample_s = {0.001, 0.001, 0.001, 10.0};  // the last rank is 10,000x slower
  const std::vector<int64_t> end = Decide(Config(8, 4), &sim, {2, 2, 2, 2}, 50);
  EXPECT_EQ(end[3], 1);
  EXPECT_EQ(Sum(end), 8);
}

TEST(BalancerTest, NoRankGetsMoreThanMaxBatch) {
  SimulatedRanks sim;
  sim.per_sample_s = {0.0001, 0.01};
  const std::vector<int64_t> end = Decide(Config(128, 70), &sim, {64, 64}, 50);
  EXPECT_EQ(end, (std::vector<int64_t>{70, 58}));
}

TEST(BalancerTest, SameInputSameDecision) {
  const std::vector<RankTiming> t = {{10, 0.3}, {20, 0.1}, {30, 0.9}, {4, 0.01}};
  EXPECT_EQ(ProposeSplit(Config(64, 40), t).batches, ProposeSplit(Config(64, 40), t).batches);
}

TEST(BalancerTest, BadInputsAreInternalErrors) {
  const BalancerConfig c = Config(128, 127);
  const std::string internal = " (internal error)";
  EXPECT_EQ(ErrorOf(c, {}), "balancer: no ranks" + internal);
  EXPECT_EQ(ErrorOf(c, {{64, 1}, {63, 1}}),
            "balancer: the batches do not sum to global_batch" + internal);
  EXPECT_EQ(ErrorOf(c, {{128, 1}, {0, 1}}),
            "balancer: a batch is outside [1, max_batch]" + internal);
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)})
    EXPECT_EQ(ErrorOf(c, {{64, 1}, {64, bad}}),
              "balancer: a time is not finite and positive" + internal);
  BalancerConfig d = c;
  d.damping = 0;
  EXPECT_EQ(ErrorOf(d, {{64, 1}, {64, 1}}), "balancer: damping must be in (0, 1]" + internal);
  d = c;
  d.max_move = 1.5;
  EXPECT_EQ(ErrorOf(d, {{64, 1}, {64, 1}}), "balancer: max_move must be in (0, 1]" + internal);
  d = c;
  d.dead_band = -0.1;
  EXPECT_EQ(ErrorOf(d, {{64, 1}, {64, 1}}), "balancer: dead_band must be >= 0" + internal);
  EXPECT_EQ(ErrorOf(Config(128, 63), {{64, 1}, {64, 1}}),
            "balancer: global_batch and max_batch cannot hold every rank" + internal);
}

TEST(BalancerTest, ModesParseAndBadOnesAreNamed) {
  EXPECT_EQ(ParseBalanceMode("off", "--balance"), BalanceMode::Off);
  EXPECT_EQ(ParseBalanceMode("adaptive", "--balance"), BalanceMode::Adaptive);
  EXPECT_EQ(ParseBalanceMode("replay", "--balance"), BalanceMode::Replay);
  EXPECT_STREQ(BalanceModeName(BalanceMode::Adaptive), "adaptive");
  try {
    ParseBalanceMode("Adaptive", "--balance");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--balance: must be off, adaptive or replay, got 'Adaptive'");
  }
}

TEST(BalancerTest, MaxBatchIsTwiceTheMeanOrTheLargestStartingBatch) {
  EXPECT_EQ(BalanceMaxBatch(128, 2, {64, 64}), 127);  // never all: the other rank keeps one
  EXPECT_EQ(BalanceMaxBatch(100, 4, {25, 25, 25, 25}), 50);
  EXPECT_EQ(BalanceMaxBatch(101, 4, {26, 25, 25, 25}), 52);
  EXPECT_EQ(BalanceMaxBatch(180, 10, {90, 10, 10, 10, 10, 10, 10, 10, 10, 10}), 90);
  EXPECT_EQ(BalanceMaxBatch(4, 4, {1, 1, 1, 1}), 1);
}

}  // namespace
}  // namespace dlh
