// DLH estimator — robust statistics of observations, and how far records of other users may
// move a prediction. Values are ln(measured / predicted) unless said otherwise.
#pragma once

#include <algorithm>
#include <vector>

namespace dlh {

// Median absolute deviation from the median, scaled by 1.4826 so that it estimates the
// standard deviation of normal data; 0 for fewer than 2 values.
double RobustSigma(const std::vector<double>& values);

// `values` without outliers: those further than 3 robust sigmas from the median (all kept
// when the sigma is 0 or there are fewer than 3).
std::vector<double> WithoutOutliers(const std::vector<double>& values);

// How far records of other users may move one user's prediction, in ln: 15%; and the most
// spread (a robust standard deviation of ln t) their records may give its band.
constexpr double kOthersCapLog = 0.13976194237515868;  // ln(1.15)
// `all` (a value learned from every record) within kOthersCapLog of `own` (the same learned
// from the caller's records alone).
inline double WithinCapOf(double all, double own) {
  return std::clamp(all, own - kOthersCapLog, own + kOthersCapLog);
}
// Shrinkage of a type's correction toward none: n / (n + kShrinkJobs) of the residuals' median.
constexpr double kShrinkJobs = 5;
// `log_factor`, learned from `n` jobs (or models), shrunk toward none by n / (n + kShrinkJobs).
inline double ShrunkTowardNone(double log_factor, double n) {
  return log_factor * n / (n + kShrinkJobs);
}
// The spread assumed for a model's runs when too few exist to measure it (run-to-run noise).
constexpr double kDefaultRunLogSigma = 0.05;

struct Residuals {
  std::vector<double> own, others;  // the caller's records, and everyone else's
};

struct Combined {
  double log_factor = 0;  // the correction: multiply predictions by exp(log_factor)
  double log_sigma = 0;   // the spread of the residuals it came from (others': capped)
  int runs = 0;           // records it used (others after dropping outliers)
  int own = 0;            // of them the caller's
};

// A model's own history: the median of the caller's records when there are any (others do
// not count then); else the median of the others' records without outliers, capped at
// kOthersCapLog either way, and their spread likewise.
Combined ModelHistory(const Residuals& r);

// A type's correction for models not run before: the caller's median shrunk by
// n / (n + kShrinkJobs); every record together (others without outliers) likewise; the
// result is the caller's part moved toward the pooled one by at most kOthersCapLog. The
// spread is of every record together, at most the caller's own spread or kOthersCapLog,
// whichever is larger.
Combined TypeCorrection(const Residuals& r);

// `value` from the caller's records (median), else the others' without outliers within
// exp(+-kOthersCapLog) of `fallback`, else `fallback` (phases: seconds, not ln).
double TrustedValue(const std::vector<double>& own, const std::vector<double>& others,
                    double fallback);

}  // namespace dlh
