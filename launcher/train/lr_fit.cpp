// DLH — the learning-rate range test's arithmetic (see lr_fit.hpp).
#include "launcher/train/lr_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "common/error.hpp"

namespace dlh {
namespace {

std::string Num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

}  // namespace

void CheckLrSweepOptions(const LrSweepOptions& o) {
  if (!(o.min_lr > 0) || !std::isfinite(o.min_lr))
    throw UsageError("--min-lr: must be a positive number, got " + Num(o.min_lr));
  if (!(o.max_lr > o.min_lr) || !std::isfinite(o.max_lr))
    throw UsageError("--max-lr: must be larger than --min-lr (" + Num(o.min_lr) + "), got " +
                     Num(o.max_lr));
  // Fewer than 10 rates leave the degree-5 fit almost no residual degrees of freedom.
  if (o.steps < 10)
    throw UsageError("--steps: must be at least 10, got " + std::to_string(o.steps));
  if (!(o.smoothing >= 0 && o.smoothing < 1))
    throw UsageError("--smoothing: must be in [0, 1), got " + Num(o.smoothing));
  if (!(o.diverge_factor > 1)) throw UsageError("divergence factor: must be above 1");
}

double SweepLr(const LrSweepOptions& o, int step) {
  const double f = o.steps > 1 ? double(step) / double(o.steps - 1) : 0;
  return o.min_lr * std::pow(o.max_lr / o.min_lr, f);
}

bool LrSweep::add(double lr, double loss, double accuracy) {
  LrPoint p;
  p.lr = lr;
  p.loss = loss;
  p.accuracy = accuracy;
  if (!std::isfinite(loss)) {
    p.smoothed = std::numeric_limits<double>::quiet_NaN();
    points_.push_back(p);
    stop_reason_ =
        std::string("loss is ") + (std::isnan(loss) ? "nan" : "inf") + " at lr " + Num(lr);
    return false;
  }
  // Bias-corrected EMA (as Adam corrects its moments): without the correction the first
  // values would be pulled towards the 0 the average starts from.
  average_ = o_.smoothing * average_ + (1 - o_.smoothing) * loss;
  const double n = double(points_.size() + 1);
  p.smoothed = average_ / (1 - std::pow(o_.smoothing, n));
  points_.push_back(p);
  if (points_.size() == 1 || p.smoothed < best_) best_ = p.smoothed;
  if (p.smoothed > o_.diverge_factor * best_) {
    stop_reason_ = "diverged: smoothed loss " + Num(p.smoothed) + " > " + Num(o_.diverge_factor) +
                   " x best " + Num(best_) + " at lr " + Num(lr);
    return false;
  }
  return true;
}

double PolyFit::value(double log10_lr) const {
  const double t = (log10_lr - center) / scale;
  double y = 0;
  for (size_t k = coef.size(); k-- > 0;) y = y * t + coef[k];
  return y;
}

double PolyFit::slope(double log10_lr) const {
  const double t = (log10_lr - center) / scale;
  double y = 0;
  for (size_t k = coef.size(); k-- > 1;) y = y * t + double(k) * coef[k];
  return y / scale;
}

PolyFit FitPolynomial(const std::vector<double>& x, const std::vector<double>& y, int degree) {
  if (degree < 1 || x.size() != y.size() || x.size() < size_t(degree) + 2)
    throw Error("polynomial fit: " + std::to_string(x.size()) + " points are too few for degree " +
                std::to_string(degree));
  const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  if (!(*hi > *lo)) throw Error("polynomial fit: every point has the same learning rate");
  PolyFit f;
  f.center = (*hi + *lo) / 2;
  f.scale = (*hi - *lo) / 2;
  const auto m = Eigen::Index(x.size()), n = Eigen::Index(degree + 1);
  Eigen::MatrixXd A(m, n);
  Eigen::VectorXd b(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    const double t = (x[size_t(i)] - f.center) / f.scale;
    double power = 1;
    for (Eigen::Index k = 0; k < n; ++k, power *= t) A(i, k) = power;
    b(i) = y[size_t(i)];
  }
  const Eigen::VectorXd c = A.colPivHouseholderQr().solve(b);
  f.coef.assign(c.data(), c.data() + n);
  f.rms = std::sqrt((A * c - b).squaredNorm() / double(m));
  return f;
}

LogFit FitLogarithmic(const std::vector<double>& x, const std::vector<double>& y) {
  LogFit f;
  if (x.size() < 2 || x.size() != y.size()) return f;
  const double n = double(x.size());
  double sx = 0, sy = 0;
  for (size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i];
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  f.b = sxx > 0 ? sxy / sxx : 0;
  f.a = my - f.b * mx;
  double ss_res = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (f.a + f.b * x[i]);
    ss_res += r * r;
  }
  f.r2 = syy > 0 ? 1 - ss_res / syy : 0;
  f.from_lr = std::pow(10, *std::min_element(x.begin(), x.end()));
  f.to_lr = std::pow(10, *std::max_element(x.begin(), x.end()));
  return f;
}

// Why the raw losses are fitted and not the smoothed ones: an EMA of weight beta lags by
// beta / (1 - beta) steps (9 at 0.9), and in a 100-step sweep over six decades that moves the
// steepest point half a decade (3x) towards larger rates. Least squares over ~100 points
// already averages the batch-to-batch noise out, without a lag. The smoothed curve still
// decides when to stop (a single noisy batch must not end the sweep) and is plotted.
LrSuggestion SuggestLr(const std::vector<LrPoint>& points, const LrFitOptions& o) {
  LrSuggestion s;
  // The fitted range: finite losses up to the first blow-up, judged against the best smoothed
  // loss so far (a few huge losses after divergence would otherwise dominate the squares).
  std::vector<double> x, y;
  double best = std::numeric_limits<double>::infinity();
  for (const LrPoint& p : points) {
    if (!std::isfinite(p.loss) || !(p.lr > 0)) break;
    if (std::isfinite(p.smoothed)) best = std::min(best, p.smoothed);
    if (x.size() > 0 && p.loss > o.diverge_factor * best) break;
    x.push_back(std::log10(p.lr));
    y.push_back(p.loss);
  }
  s.points_fitted = int(x.size());
  if (x.size() < size_t(o.degree) + 4) {
    s.note = "only " + std::to_string(x.size()) +
             " finite points before the loss diverged: lower --min-lr or raise --steps";
    return s;
  }
  s.poly = FitPolynomial(x, y, o.degree);

  // Dense evaluation: a degree-5 polynomial has at most 4 turning points, and a 2,000-point
  // grid over at most a few decades finds extremes to ~0.003 decade without root finding.
  constexpr int kGrid = 2000;
  const double x0 = x.front(), x1 = x.back();
  auto grid = [&](int i) { return x0 + (x1 - x0) * double(i) / kGrid; };
  int i_min = 0;
  for (int i = 1; i <= kGrid; ++i)
    if (s.poly.value(grid(i)) < s.poly.value(grid(i_min))) i_min = i;
  s.lr_min = std::pow(10, grid(i_min));
  s.lr_min_over_10 = s.lr_min / 10;
  const double start = s.poly.value(x0);
  s.drop = start - s.poly.value(grid(i_min));
  // The logarithmic fit covers the descent: the points up to the fitted minimum.
  const auto descent = std::upper_bound(x.begin(), x.end(), grid(i_min)) - x.begin();
  s.log = FitLogarithmic(std::vector<double>(x.begin(), x.begin() + descent),
                         std::vector<double>(y.begin(), y.begin() + descent));
  if (!(s.drop >= o.min_drop * std::abs(start)) || !(s.drop >= o.min_drop_rms * s.poly.rms)) {
    s.note = "no clear minimum: the fitted loss falls by " + Num(s.drop) + " from " + Num(start) +
             " (noise " + Num(s.poly.rms) +
             "); widen --min-lr/--max-lr, or check the data and the model";
    return s;
  }

  // The suggestion is the upper edge of the valley floor: the largest rate above the fitted
  // minimum at which the fitted loss has given back less than `floor` (5%) of its fall. That
  // is Smith's upper bound (2017, section 3.3: where the loss "slows, becomes ragged"), which
  // his one-cycle policy ramps up to and back down from (Smith 2018, "A disciplined approach
  // to neural network hyper-parameters", section 4.1), read where the fit is flat rather
  // than at its single lowest grid point. Why not fastai's minimum / 10: it leaves a decade
  // of margin for a rate held for a whole run, but a warm-up + decay schedule holds its peak
  // only briefly, and only after the warm-up has let the weights settle where larger rates
  // are stable (Goyal et al. 2017; Gilmer et al. 2022). On Fashion-MNIST
  // (docs/reference/lr-find.md) minimum / 10 lost 4 points of test accuracy at batch 128 and
  // 7 at 512 in 2 epochs; the floor's edge matched the hand-picked rate. Why not the steepest
  // descent (still reported): on real curves the descent is almost straight in log10(lr) over
  // several decades, so its steepest point is set by noise and by the first steps shedding the
  // initialisation's excess loss.
  int i_steep = 0;
  for (int i = 1; i <= i_min; ++i)
    if (s.poly.slope(grid(i)) < s.poly.slope(grid(i_steep))) i_steep = i;
  if (!(s.poly.slope(grid(i_steep)) < 0)) {
    s.note = "no clear minimum: the fitted loss never falls";
    return s;
  }
  s.lr_steepest = std::pow(10, grid(i_steep));
  const double ceiling = s.poly.value(grid(i_min)) + o.floor * s.drop;
  int i_hi = i_min, i_lo = i_min;
  while (i_hi < kGrid && s.poly.value(grid(i_hi + 1)) <= ceiling) ++i_hi;
  while (i_lo > 0 && s.poly.value(grid(i_lo - 1)) <= ceiling) --i_lo;
  s.lr_low = std::pow(10, grid(i_lo));
  s.lr_high = std::pow(10, grid(i_hi));
  s.lr = s.lr_high;
  s.status = LrSuggestion::Status::kOk;
  // x holds fewer points than were run when the run diverged: the fit ends before the
  // divergence, and raising --max-lr, which the run never reached, would change nothing.
  if (i_min == kGrid && x.size() < points.size())
    s.note =
        "the loss was still falling at the last rate fitted, just before it diverged: the "
        "minimum lies between the two; more --steps would sweep that span more finely";
  else if (i_min == kGrid)
    s.note = "the loss was still falling at the last rate tried: raise --max-lr to see the minimum";
  else if (i_hi == kGrid && x.size() == points.size())
    s.note =
        "the loss did not rise again up to the last rate tried, so the upper bound was not "
        "reached and the suggestion is that last rate: raise --max-lr";
  else if (i_steep == 0)
    s.note = "the loss fell fastest at the first rate tried: lower --min-lr to see where it starts";
  return s;
}

}  // namespace dlh
