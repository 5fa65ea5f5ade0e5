// Tests of the allreduce model fits (estimator/model/comm_fit.hpp): the piecewise model finds
// known regimes, stays monotone, and its link round-trips through a cluster description.
#include "estimator/model/comm_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "estimator/model/comm_model.hpp"

namespace dlh {
namespace {

// Three regimes of a made-up shared-memory link, in message bytes: eager copies, a fast
// single-copy middle and a slower out-of-cache tail. The breakpoints sit halfway (log
// scale) between the message sizes of Sizes() over 2 ranks, where the fit puts them.
AlphaBeta ThreeRegimes() {
  AlphaBeta ab;
  ab.regimes = {{2896, 1e-6, 1 / 1.5e9}, {370728, 8e-6, 1 / 6e9}, {0, 30e-6, 1 / 2e9}};
  return ab;
}

// 1 KiB to 256 MiB, x2 steps: 19 sizes.
std::vector<double> Sizes() {
  std::vector<double> sizes;
  for (double b = 1024; b <= 256.0 * 1024 * 1024; b *= 2) sizes.push_back(b);
  return sizes;
}

std::vector<AllreducePoint> PointsOf(const AlphaBeta& truth, int ranks,
                                     const std::vector<double>& sizes) {
  std::vector<AllreducePoint> points;
  for (double b : sizes) points.push_back({b, RingAllreduceSeconds(b, ranks, truth)});
  return points;
}

TEST(CommFit, PiecewiseRecoversKnownRegimes) {
  // Breakpoints for 2 ranks: sqrt(4096 * 8192) / 2 = 2896 and sqrt(512Ki * 1Mi) / 2 = 370728.
  const AlphaBeta truth = ThreeRegimes();
  const std::vector<AllreducePoint> points = PointsOf(truth, 2, Sizes());
  const PiecewiseFit fit = FitPiecewiseAlphaBeta(points, 2);
  ASSERT_EQ(fit.model.regimes.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_NEAR(fit.model.regimes[r].alpha_s / truth.regimes[r].alpha_s, 1, 1e-9) << r;
    EXPECT_NEAR(fit.model.regimes[r].beta_s_per_byte / truth.regimes[r].beta_s_per_byte, 1, 1e-9)
        << r;
  }
  EXPECT_EQ(fit.model.regimes[0].up_to_bytes, 2896);
  EXPECT_EQ(fit.model.regimes[1].up_to_bytes, 370728);
  EXPECT_EQ(fit.first, (std::vector<size_t>{0, 3, 10}));
  EXPECT_LT(fit.mape_pct, 1e-9);
  // One and two regimes were tried and are worse; four fit exactly too but cost a penalty.
  ASSERT_EQ(fit.best_mape.size(), 4u);
  EXPECT_GT(fit.best_mape[0], 10);
  EXPECT_GT(fit.best_mape[1], fit.best_mape[2] + 2);
  // The single pair misses these points by far more.
  EXPECT_GT(AllreduceMapePct(points, 2, FitAlphaBeta(points, 2)), 10);
}

TEST(CommFit, OneLineStaysOneRegime) {
  const AlphaBeta truth(5e-6, 1e-10);
  for (int ranks : {2, 4}) {
    const PiecewiseFit fit = FitPiecewiseAlphaBeta(PointsOf(truth, ranks, Sizes()), ranks);
    // Every split fits exactly as well; ties go to fewer regimes, even without a penalty.
    EXPECT_TRUE(fit.model.regimes.empty()) << ranks;
    EXPECT_NEAR(fit.model.alpha_s / truth.alpha_s, 1, 1e-9);
    EXPECT_NEAR(fit.model.beta_s_per_byte / truth.beta_s_per_byte, 1, 1e-9);
    PiecewiseOptions no_penalty;
    no_penalty.penalty_pct = 0;
    EXPECT_TRUE(FitPiecewiseAlphaBeta(PointsOf(truth, ranks, Sizes()), ranks, no_penalty)
                    .model.regimes.empty());
  }
}

TEST(CommFit, RegimesKeepTheirMinimumPoints) {
  const std::vector<AllreducePoint> points = PointsOf(ThreeRegimes(), 2, Sizes());
  PiecewiseOptions o;
  o.min_points = 8;  // 19 points: at most 2 regimes of >= 8
  const PiecewiseFit fit = FitPiecewiseAlphaBeta(points, 2, o);
  EXPECT_LE(fit.model.regimes.size(), 2u);
  EXPECT_LT(fit.best_mape[2], 0);  // 3 regimes: no split possible
  EXPECT_LT(fit.best_mape[3], 0);
  for (size_t r = 0; r < fit.first.size(); ++r) {
    const size_t end = r + 1 < fit.first.size() ? fit.first[r + 1] : points.size();
    EXPECT_GE(end - fit.first[r], 8u);
  }
}

TEST(CommFit, UnsortedAndRepeatedSizesAreFine) {
  std::vector<AllreducePoint> points = PointsOf(ThreeRegimes(), 2, Sizes());
  std::vector<AllreducePoint> shuffled(points.rbegin(), points.rend());
  shuffled.push_back(points[5]);  // a repeated size never straddles a breakpoint
  const PiecewiseFit fit = FitPiecewiseAlphaBeta(shuffled, 2);
  ASSERT_EQ(fit.model.regimes.size(), 3u);
  EXPECT_EQ(fit.model.regimes[1].up_to_bytes, 370728);
}

TEST(CommModel, PiecewiseIsMonotoneInBytes) {
  // The middle regime is much faster than the first at the breakpoint (a protocol switch
  // that pays off): the model holds the first regime's value instead of dropping.
  AlphaBeta ab;
  ab.regimes = {{65536, 20e-6, 1 / 1e9}, {1 << 22, 1e-6, 1 / 20e9}, {0, 0, 1 / 3e9}};
  const double at_break = 20e-6 + 65536 / 1e9;
  EXPECT_DOUBLE_EQ(ab.MessageSeconds(65536), at_break);
  EXPECT_DOUBLE_EQ(ab.MessageSeconds(65537), at_break);
  // Further on the middle regime's own line is above the floor again.
  EXPECT_DOUBLE_EQ(ab.MessageSeconds(4e6), 1e-6 + 4e6 / 20e9);
  for (int ranks : {2, 3, 8}) {
    double previous = 0;
    for (double b = 1; b < 1e10; b *= 1.07) {
      const double t = RingAllreduceSeconds(b, ranks, ab);
      EXPECT_GE(t, previous) << b << " bytes, " << ranks << " ranks";
      previous = t;
    }
  }
}

TEST(CommModel, RingPicksTheRegimeByMessageSize) {
  AlphaBeta ab;
  ab.regimes = {{1000, 1e-6, 1e-9}, {0, 5e-6, 1e-10}};
  // 4 ranks, 4000 bytes: 6 messages of 1000 bytes, the first regime.
  EXPECT_DOUBLE_EQ(RingAllreduceSeconds(4000, 4, ab), 6 * (1e-6 + 1000 * 1e-9));
  // 4004 bytes: messages of 1001 bytes, the second regime.
  EXPECT_DOUBLE_EQ(RingAllreduceSeconds(4004, 4, ab), 6 * (5e-6 + 1001 * 1e-10));
  // Hierarchical: 2 GPUs per node send 1e6 / 2, the 4-node ring 1e6 / 8: both the second.
  const AlphaBeta pair(5e-6, 1e-10);
  EXPECT_DOUBLE_EQ(HierarchicalAllreduceSeconds(1e6, 2, 4, ab, ab),
                   RingAllreduceSeconds(1e6, 2, pair) + RingAllreduceSeconds(5e5, 4, pair));
}

TEST(CommFit, LinkRoundTripsThroughTheCluster) {
  const AlphaBeta truth = ThreeRegimes();
  const Link link = LinkFromModel(truth);
  ASSERT_EQ(link.regimes.size(), 3u);
  EXPECT_DOUBLE_EQ(link.regimes[0].up_to_bytes, 2896);
  EXPECT_DOUBLE_EQ(link.regimes[0].latency_us, 1);
  EXPECT_DOUBLE_EQ(link.regimes[0].bandwidth_gbs, 1.5);
  EXPECT_DOUBLE_EQ(link.regimes[2].up_to_bytes, 0);
  const AlphaBeta back = AlphaBeta::from_link(link);
  for (double b : Sizes())
    EXPECT_NEAR(RingAllreduceSeconds(b, 2, back) / RingAllreduceSeconds(b, 2, truth), 1, 1e-3);
  // A single pair stays a pair, rounded to 4 digits.
  const Link pair = LinkFromModel(AlphaBeta(1.23456e-6, 1 / 5.4321e9));
  EXPECT_TRUE(pair.regimes.empty());
  EXPECT_DOUBLE_EQ(pair.latency_us, 1.235);
  EXPECT_DOUBLE_EQ(pair.bandwidth_gbs, 5.432);
}

TEST(CommFit, PiecewiseErrors) {
  auto error = [](const std::vector<AllreducePoint>& points, int ranks) -> std::string {
    try {
      FitPiecewiseAlphaBeta(points, ranks);
    } catch (const EstimateError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_EQ(error({{1e3, 1e-5}, {1e6, 1e-3}}, 2),
            "allreduce fit: too few points for a regime: got 2, need at least 3");
  EXPECT_EQ(error({{1e3, 1e-5}, {1e6, 1e-3}, {1e7, 1e-2}}, 1),
            "allreduce fit: needs at least 2 ranks, got 1");
  EXPECT_EQ(error({{1e3, 1e-5}, {1e6, -1e-3}, {1e7, 1e-2}}, 2),
            "allreduce fit: point 1 needs bytes >= 0 and seconds > 0, got 1000000.000000 bytes, "
            "-0.001000 s");
  // Time falling with size: no regime has a positive bandwidth.
  EXPECT_EQ(error({{1e3, 3e-3}, {1e6, 2e-3}, {1e7, 1e-3}}, 2),
            "allreduce fit: no split of the points into regimes gives positive bandwidths: the "
            "timings do not follow the alpha-beta model");
}

}  // namespace
}  // namespace dlh
