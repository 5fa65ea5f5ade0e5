// DLH estimator — robust statistics of observations (see robust.hpp).
//
// Median and MAD rather than mean and deviation: one user's store may hold records another
// wrote to mislead (a shared folder others can write), and a median moves by at most one
// record's rank per record added, where a mean follows a single absurd value. Records of
// other users are in addition capped in how far they move a prediction, so that even a
// majority of false records cannot steer someone else's plan by more than kOthersCapLog, nor
// widen its band (the spread its time limit takes) beyond kOthersCapLog.
#include "estimator/observe/robust.hpp"

#include <algorithm>
#include <cmath>

#include "common/median.hpp"

namespace dlh {

double RobustSigma(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = Median(values);
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double v : values) dev.push_back(std::fabs(v - m));
  return 1.4826 * Median(dev);
}

std::vector<double> WithoutOutliers(const std::vector<double>& values) {
  const double sigma = RobustSigma(values);
  if (values.size() < 3 || sigma <= 0) return values;
  const double m = Median(values);
  std::vector<double> kept;
  for (double v : values)
    if (std::fabs(v - m) <= 3 * sigma) kept.push_back(v);
  return kept;
}

namespace {

double Clamp(double v, double lo, double hi) { return std::min(hi, std::max(lo, v)); }

double SpreadOf(const std::vector<double>& v) {
  return v.size() >= 3 ? RobustSigma(v) : kDefaultRunLogSigma;
}

}  // namespace

Combined ModelHistory(const Residuals& r) {
  Combined c;
  if (!r.own.empty()) {
    c.log_factor = Median(r.own);
    c.log_sigma = SpreadOf(r.own);
    c.runs = c.own = int(r.own.size());
    return c;
  }
  const std::vector<double> kept = WithoutOutliers(r.others);
  if (kept.empty()) return c;
  c.log_factor = Clamp(Median(kept), -kOthersCapLog, kOthersCapLog);
  // Capped as the factor is: records split between far too slow and far too fast leave the
  // median at none and would otherwise widen the band (and the time limit) without bound.
  c.log_sigma = std::min(SpreadOf(kept), kOthersCapLog);
  c.runs = int(kept.size());
  return c;
}

Combined TypeCorrection(const Residuals& r) {
  Combined c;
  const double n_own = double(r.own.size());
  const double own = r.own.empty() ? 0 : ShrunkTowardNone(Median(r.own), n_own);
  std::vector<double> all = r.own;
  const std::vector<double> kept = WithoutOutliers(r.others);
  all.insert(all.end(), kept.begin(), kept.end());
  if (all.empty()) return c;
  const double n = double(all.size());
  const double pooled = ShrunkTowardNone(Median(all), n);
  c.log_factor = own + Clamp(pooled - own, -kOthersCapLog, kOthersCapLog);
  // Others widen the spread of the caller's own records (or none) up to kOthersCapLog only.
  const double own_sigma = r.own.empty() ? 0 : SpreadOf(r.own);
  c.log_sigma = std::min(SpreadOf(all), std::max(own_sigma, kOthersCapLog));
  c.runs = int(all.size());
  c.own = int(r.own.size());
  return c;
}

double TrustedValue(const std::vector<double>& own, const std::vector<double>& others,
                    double fallback) {
  if (!own.empty()) return Median(own);
  const std::vector<double> kept = WithoutOutliers(others);
  if (kept.empty()) return fallback;
  if (!(fallback > 0)) return fallback;  // nothing to cap against: others alone do not set it
  return Clamp(Median(kept), fallback * std::exp(-kOthersCapLog),
               fallback * std::exp(kOthersCapLog));
}

}  // namespace dlh
