// DLH — the learning-rate range test's arithmetic (`dlh-launch lr-find`), free of MPI and
// engines so that it is tested on synthetic curves: the exponential sweep, the smoothed
// loss and its divergence stop, the polynomial and logarithmic fits, and the suggestion.
//
// Method: L. N. Smith, "Cyclical Learning Rates for Training Neural Networks" (2017),
// section 3.3 (the "LR range test"), with the bias-corrected exponential moving average
// and the 4x-the-best divergence stop that fastai's lr_find made common.
#pragma once

#include <string>
#include <vector>

namespace dlh {

struct LrSweepOptions {
  double min_lr = 1e-5;       // first rate of the sweep
  double max_lr = 10;         // last rate (reached only if nothing diverges first)
  int steps = 100;            // rates tried, min_lr..max_lr geometrically
  double smoothing = 0.9;     // EMA weight of the past (0: no smoothing), in [0, 1)
  double diverge_factor = 4;  // stop once the smoothed loss exceeds this times its best
};

// Throws UsageError naming the option (--min-lr, --max-lr, --steps, --smoothing).
void CheckLrSweepOptions(const LrSweepOptions& options);

// The rate of step i (0-based): min_lr * (max_lr / min_lr)^(i / (steps - 1)).
double SweepLr(const LrSweepOptions& options, int step);

struct LrPoint {
  double lr = 0;        // the rate of the update whose effect `loss` measures
  double loss = 0;      // training loss of the global batch (may be NaN or inf)
  double accuracy = 0;  // of the same batch, in [0, 1]
  double smoothed = 0;  // bias-corrected EMA of the losses so far (NaN once a loss is)
};

// Records the sweep one step at a time and decides when it must stop.
class LrSweep {
 public:
  explicit LrSweep(const LrSweepOptions& options) : o_(options) {}
  // Adds a point; returns false when the sweep must stop here (the point is kept): the loss
  // is NaN or infinite, or the smoothed loss is above diverge_factor x its best so far.
  bool add(double lr, double loss, double accuracy);
  const std::vector<LrPoint>& points() const { return points_; }
  // Why the sweep stopped early ("" when it did not): "loss is nan at lr 3.2",
  // "diverged: smoothed loss 9.31 > 4 x best 2.05 at lr 1.7".
  const std::string& stop_reason() const { return stop_reason_; }

 private:
  LrSweepOptions o_;
  std::vector<LrPoint> points_;
  double average_ = 0, best_ = 0;
  std::string stop_reason_;
};

// y = sum_k coef[k] t^k with t = (log10(lr) - center) / scale: the abscissa is scaled to
// [-1, 1] over the fitted points, which keeps a degree-5 Vandermonde system well conditioned.
struct PolyFit {
  double center = 0, scale = 1;
  std::vector<double> coef;  // lowest degree first
  double rms = 0;            // root mean square residual, in loss units
  double value(double log10_lr) const;
  double slope(double log10_lr) const;  // d loss / d log10(lr)
};

// Least squares (Eigen, Householder QR). Throws Error with fewer than degree + 2 points or
// when all the abscissae are the same.
PolyFit FitPolynomial(const std::vector<double>& log10_lr, const std::vector<double>& loss,
                      int degree);

// loss = a + b log10(lr): the average fall per decade over a range, and how well a straight
// line in log-lr explains it (r2 = 1 - SSres / SStot; 0 when the loss is constant).
struct LogFit {
  double a = 0, b = 0, r2 = 0;
  double from_lr = 0, to_lr = 0;  // the rates fitted
};
LogFit FitLogarithmic(const std::vector<double>& log10_lr, const std::vector<double>& loss);

struct LrFitOptions {
  int degree = 5;             // of the polynomial
  double diverge_factor = 4;  // raw losses above this x the best smoothed loss are not fitted
  double min_drop = 0.05;     // the fitted loss must fall by this fraction of its start ...
  double min_drop_rms = 2;    // ... and by this many residual rms, or there is no clear minimum
  // The valley floor: the rates around the minimum whose fitted loss is within this fraction
  // of the fall (start - minimum) above the minimum. Its upper edge is the suggestion.
  double floor = 0.05;
};

struct LrSuggestion {
  enum class Status { kOk, kNoClearMinimum };
  Status status = Status::kNoClearMinimum;
  std::string note;           // why there is no suggestion, or a caution that comes with one
  double lr = 0;              // the suggestion: the valley floor's upper edge (= lr_high)
  double lr_low = 0;          // the interval: the valley floor, the rates around lr_min ...
  double lr_high = 0;         // ... whose fitted loss is within `floor` x drop of its minimum
  double lr_steepest = 0;     // the most negative slope of the fit before its minimum
  double lr_min = 0;          // where the fitted loss is lowest (within the fitted rates)
  double lr_min_over_10 = 0;  // fastai's rule (reported, not used: see lr_fit.cpp)
  double drop = 0;            // fitted loss at the first rate minus its minimum
  int points_fitted = 0;      // finite points before the blow-up
  PolyFit poly;
  LogFit log;  // over the points from the first rate to lr_min
};

// Fits the raw losses of the sweep (the finite ones, up to the first that exceeds
// diverge_factor x the best smoothed loss) and suggests a rate. Never throws for a bad
// curve: a flat, rising or too short one gives Status::kNoClearMinimum with a note.
LrSuggestion SuggestLr(const std::vector<LrPoint>& points, const LrFitOptions& options);

}  // namespace dlh
