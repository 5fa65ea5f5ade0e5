// Tests of the learning-rate range test's arithmetic (launcher/train/lr_fit.cpp) and its
// plot (lr_plot.cpp), on synthetic loss curves whose answer is known.
#include "launcher/train/lr_fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "common/error.hpp"
#include "launcher/train/lr_plot.hpp"

namespace dlh {
namespace {

// Runs a sweep whose loss at rate lr is curve(log10(lr)) (+ Gaussian noise of `sigma`),
// stopping where LrSweep says so, as lr_find.cpp does.
LrSweep Sweep(const std::function<double(double)>& curve, double sigma = 0,
              LrSweepOptions o = LrSweepOptions()) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 1);
  LrSweep sweep(o);
  for (int i = 0; i < o.steps; ++i) {
    const double lr = SweepLr(o, i);
    if (!sweep.add(lr, curve(std::log10(lr)) + sigma * noise(rng), 0.5)) break;
  }
  return sweep;
}

// A typical range-test curve: flat at 2.3 for small rates, a fall of 2 centred on
// log10(lr) = centre (steepest there), then a blow-up two decades later.
double Typical(double x, double centre) {
  return 2.3 - 2.0 / (1 + std::exp(-2.5 * (x - centre))) + std::exp(3 * (x - centre - 2));
}

TEST(LrSweepTest, RatesGoGeometricallyFromMinToMax) {
  LrSweepOptions o;
  EXPECT_DOUBLE_EQ(SweepLr(o, 0), 1e-5);
  EXPECT_NEAR(SweepLr(o, o.steps - 1), 10, 1e-9);
  EXPECT_NEAR(SweepLr(o, 33) / SweepLr(o, 32), SweepLr(o, 1) / SweepLr(o, 0), 1e-12);
}

TEST(LrSweepTest, SmoothedLossIsBiasCorrected) {
  LrSweepOptions o;
  o.smoothing = 0.9;
  LrSweep sweep(o);
  sweep.add(1e-5, 2.0, 0);
  EXPECT_DOUBLE_EQ(sweep.points()[0].smoothed, 2.0);  // not 0.1 x 2.0
  sweep.add(2e-5, 4.0, 0);
  // (0.9 * 0.1 * 2 + 0.1 * 4) / (1 - 0.81)
  EXPECT_NEAR(sweep.points()[1].smoothed, (0.18 + 0.4) / 0.19, 1e-12);
}

TEST(LrSweepTest, StopsWhenTheSmoothedLossPassesFourTimesTheBest) {
  // 1.0 for 40 steps, then doubling every step: the smoothed loss needs a few steps to pass 4.
  LrSweepOptions o;
  LrSweep s(o);
  int stopped_at = -1;
  for (int i = 0; i < o.steps; ++i)
    if (!s.add(SweepLr(o, i), i < 40 ? 1.0 : std::pow(2.0, i - 39), 0)) {
      stopped_at = i;
      break;
    }
  ASSERT_GT(stopped_at, 40);
  EXPECT_LT(stopped_at, 50);
  EXPECT_EQ(int(s.points().size()), stopped_at + 1);
  EXPECT_GT(s.points().back().smoothed, 4.0);
  EXPECT_LE(s.points()[size_t(stopped_at) - 1].smoothed, 4.0);
  EXPECT_NE(s.stop_reason().find("diverged: smoothed loss"), std::string::npos) << s.stop_reason();
}

TEST(LrSweepTest, NanOrInfStopsAtOnceAndIsNotFitted) {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), HUGE_VAL}) {
    LrSweepOptions o;
    LrSweep s(o);
    int i = 0;
    for (; i < o.steps; ++i)
      if (!s.add(SweepLr(o, i), i == 60 ? bad : Typical(std::log10(SweepLr(o, i)), -2), 0)) break;
    EXPECT_EQ(i, 60);
    EXPECT_EQ(s.points().size(), 61u);
    EXPECT_EQ(s.stop_reason().rfind(std::isnan(bad) ? "loss is nan at lr" : "loss is inf", 0), 0u)
        << s.stop_reason();
    const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
    EXPECT_EQ(sug.points_fitted, 60);
    EXPECT_EQ(sug.status, LrSuggestion::Status::kOk) << sug.note;
  }
}

// A loss falling up to a blow-up: the fit ends before it, well below --max-lr, so raising
// --max-lr would change nothing; the note once said to (2026-12-07).
TEST(LrSuggestTest, AFallUpToADivergenceDoesNotAskForAHigherMaxLr) {
  std::vector<LrPoint> points;
  for (int i = 0; i <= 30; ++i) {
    const double x = -5 + 0.15 * i;
    LrPoint p;
    p.lr = std::pow(10, x);
    p.loss = i < 30 ? 3 - 0.3 * (x + 5) : 100;  // the last one diverged
    p.smoothed = p.loss;
    points.push_back(p);
  }
  const LrSuggestion sug = SuggestLr(points, LrFitOptions());
  ASSERT_EQ(sug.status, LrSuggestion::Status::kOk) << sug.note;
  EXPECT_EQ(sug.points_fitted, 30);
  EXPECT_EQ(sug.note.find("raise --max-lr"), std::string::npos) << sug.note;
  EXPECT_NE(sug.note.find("just before it diverged"), std::string::npos) << sug.note;
}

TEST(LrSuggestTest, RecoversTheSteepestPointOfAnExactCubic) {
  // slope = -1 + 3 * 0.05 * (x + 2)^2: steepest at x = -2, minimum at x = -2 + sqrt(1/0.15).
  auto cubic = [](double x) { return 3 - (x + 2) + 0.05 * std::pow(x + 2, 3); };
  LrSweepOptions o;
  o.max_lr = 1;  // x in [-5, 0]: beyond the minimum at 0.58 the sweep would not diverge
  const LrSweep s = Sweep(cubic, 0, o);
  const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
  ASSERT_EQ(sug.status, LrSuggestion::Status::kOk) << sug.note;
  EXPECT_NEAR(std::log10(sug.lr_steepest), -2, 0.01);
  EXPECT_NEAR(sug.poly.rms, 0, 1e-9);  // a cubic is a degree-5 polynomial
  // The minimum lies beyond the sweep (x = 0.58 > 0): flagged; the interval ends at the edge.
  EXPECT_NE(sug.note.find("raise --max-lr"), std::string::npos) << sug.note;
  EXPECT_NEAR(sug.lr_min, 1, 1e-9);
  // Still falling at the edge: the floor is the last rate alone, and so is the suggestion.
  EXPECT_NEAR(sug.lr, 1, 1e-9);
  EXPECT_DOUBLE_EQ(sug.lr_high, sug.lr);
  EXPECT_LT(sug.lr_low, sug.lr_min);
  EXPECT_NEAR(sug.lr_min_over_10, 0.1, 1e-9);  // reported, not used
  EXPECT_LT(sug.log.b, 0);                     // falls with the rate
}

TEST(LrSuggestTest, FindsATypicalCurvesOptimumThroughNoiseAndDivergence) {
  for (double centre : {-3.0, -2.0}) {
    const LrSweep s = Sweep([&](double x) { return Typical(x, centre); }, 0.03);
    ASSERT_FALSE(s.stop_reason().empty()) << "the blow-up should stop the sweep, centre " << centre
                                          << ", " << s.points().size() << " points";
    const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
    ASSERT_EQ(sug.status, LrSuggestion::Status::kOk) << sug.note;
    EXPECT_NEAR(std::log10(sug.lr_steepest), centre, 0.3) << "centre " << centre;
    // The true minimum of Typical() lies ~1.3 decades above the centre.
    EXPECT_GT(std::log10(sug.lr_min), centre + 0.8);
    EXPECT_LT(std::log10(sug.lr_min), centre + 1.8);
    EXPECT_NEAR(sug.lr_min_over_10, sug.lr_min / 10, 1e-12);
    // The suggestion is the valley floor's upper edge: above the minimum, where the fitted
    // loss has given back 5% of its fall.
    EXPECT_DOUBLE_EQ(sug.lr, sug.lr_high);
    EXPECT_LE(sug.lr_low, sug.lr_min);
    EXPECT_GT(sug.lr, sug.lr_min);
    const double at_min = sug.poly.value(std::log10(sug.lr_min));
    EXPECT_NEAR(sug.poly.value(std::log10(sug.lr)), at_min + 0.05 * sug.drop, 0.01 * sug.drop);
    EXPECT_LT(std::log10(sug.lr), centre + 2.3) << "beyond the blow-up";
    EXPECT_GT(sug.drop, 1.5);
    EXPECT_TRUE(sug.note.empty()) << sug.note;
  }
}

TEST(LrSuggestTest, SuggestsTheUpperEdgeOfTheValleyFloorOfAnExactParabola) {
  // loss = 1 + (x + 2)^2 over x in [-5, 0]: fall 9 from x = -5 to the minimum at x = -2; the
  // floor (within 5% of the fall, 0.45) is |x + 2| <= sqrt(0.45).
  LrSweepOptions o;
  o.max_lr = 1;
  o.diverge_factor = 1e9;  // keep every point
  const LrSweep s = Sweep([](double x) { return 1 + (x + 2) * (x + 2); }, 0, o);
  const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
  ASSERT_EQ(sug.status, LrSuggestion::Status::kOk) << sug.note;
  EXPECT_NEAR(std::log10(sug.lr_min), -2, 0.005);
  EXPECT_NEAR(sug.drop, 9, 1e-6);
  EXPECT_NEAR(std::log10(sug.lr), -2 + std::sqrt(0.45), 0.005);
  EXPECT_NEAR(std::log10(sug.lr_low), -2 - std::sqrt(0.45), 0.005);
  EXPECT_DOUBLE_EQ(sug.lr_high, sug.lr);
  LrFitOptions wider;
  wider.floor = 0.2;  // the floor is a parameter: 20% of the fall is |x + 2| <= sqrt(1.8)
  EXPECT_NEAR(std::log10(SuggestLr(s.points(), wider).lr), -2 + std::sqrt(1.8), 0.005);
}

TEST(LrSuggestTest, AFloorReachingTheLastRateWithoutDivergenceSaysSo) {
  // 1 + 0.3 x^2 over x in [-5, 1]: a fall of 7.5 to the minimum at lr 1, then a rise of 0.3 (4%
  // of the fall) up to lr 10: the floor runs to the last rate and the upper bound is not seen.
  auto curve = [](double x) { return 1 + 0.3 * x * x; };
  const LrSweep s = Sweep(curve);
  ASSERT_TRUE(s.stop_reason().empty()) << s.stop_reason();
  const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
  ASSERT_EQ(sug.status, LrSuggestion::Status::kOk) << sug.note;
  EXPECT_NEAR(std::log10(sug.lr_min), 0, 0.005);
  EXPECT_NEAR(sug.lr, 10, 1e-6);
  EXPECT_NE(sug.note.find("upper bound was not reached"), std::string::npos) << sug.note;
  // The same curve cut by a blow-up after lr 3: the floor ends at the last rate fitted, which
  // is below a real upper bound, so there is no such note (a parabola falls fastest at its
  // first rate, which gets the other note).
  const LrSweep cut = Sweep([&](double x) { return x < 0.5 ? curve(x) : 50.0; });
  ASSERT_FALSE(cut.stop_reason().empty());
  const LrSuggestion bounded = SuggestLr(cut.points(), LrFitOptions());
  ASSERT_EQ(bounded.status, LrSuggestion::Status::kOk) << bounded.note;
  EXPECT_LT(std::log10(bounded.lr), 0.5);
  EXPECT_GT(std::log10(bounded.lr), 0.4);
  EXPECT_EQ(bounded.note.find("upper bound"), std::string::npos) << bounded.note;
}

TEST(LrSuggestTest, AFlatCurveHasNoClearMinimum) {
  for (double sigma : {0.0, 0.05}) {
    const LrSweep s = Sweep([](double) { return 2.3; }, sigma);
    const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
    EXPECT_EQ(sug.status, LrSuggestion::Status::kNoClearMinimum) << "sigma " << sigma;
    EXPECT_EQ(sug.note.rfind("no clear minimum", 0), 0u) << sug.note;
  }
}

TEST(LrSuggestTest, ARisingCurveHasNoClearMinimum) {
  LrSweepOptions o;
  o.diverge_factor = 1e9;  // keep every point
  const LrSweep s = Sweep([](double x) { return 1 + 0.1 * (x + 5); }, 0, o);
  const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
  EXPECT_EQ(sug.status, LrSuggestion::Status::kNoClearMinimum);
}

TEST(LrSuggestTest, EarlyDivergenceIsTooShortToFit) {
  LrSweepOptions o;
  LrSweep s(o);
  for (int i = 0; i < o.steps; ++i)
    if (!s.add(SweepLr(o, i), i < 3 ? 1.0 : 1e3, 0)) break;
  const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
  EXPECT_EQ(sug.status, LrSuggestion::Status::kNoClearMinimum);
  EXPECT_NE(sug.note.find("lower --min-lr"), std::string::npos) << sug.note;
}

TEST(LrSweepTest, BadOptionsNameTheOption) {
  auto message = [](LrSweepOptions o) {
    try {
      CheckLrSweepOptions(o);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  LrSweepOptions o;
  EXPECT_EQ(message(o), "accepted");
  o.max_lr = o.min_lr;
  EXPECT_EQ(message(o).rfind("--max-lr: must be larger than --min-lr", 0), 0u);
  o = LrSweepOptions();
  o.min_lr = 0;
  EXPECT_EQ(message(o).rfind("--min-lr:", 0), 0u);
  o = LrSweepOptions();
  o.steps = 9;
  EXPECT_EQ(message(o), "--steps: must be at least 10, got 9");
  o = LrSweepOptions();
  o.smoothing = 1;
  EXPECT_EQ(message(o).rfind("--smoothing:", 0), 0u);
}

TEST(PolyFitTest, TooFewPointsThrow) {
  EXPECT_THROW(FitPolynomial({1, 2, 3}, {1, 2, 3}, 5), Error);
  EXPECT_THROW(FitPolynomial(std::vector<double>(10, 1.0), std::vector<double>(10, 1.0), 5), Error);
}

TEST(LrPlotTest, DrawsTheCurvesAndEscapesTheTitle) {
  const LrSweep s = Sweep([](double x) { return Typical(x, -2); }, 0.02);
  const LrSuggestion sug = SuggestLr(s.points(), LrFitOptions());
  const std::string svg = LrPlotSvg(s.points(), sug, "a<b & c");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("a&lt;b &amp; c"), std::string::npos);
  int polylines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1))
    ++polylines;
  EXPECT_EQ(polylines, 3);  // raw, smoothed, fit
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace dlh
