// DLH estimator — the step-time model: design rows and the non-negative relative-error fit
// with k-fold cross-validation (calibration files: calibration_file.cpp).

#include "estimator/model/time_model.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <limits>
#include <random>

#include "common/atomic_file.hpp"
#include "common/file_text.hpp"
#include "common/json_parse.hpp"
#include "estimator/model/engine_fingerprint.hpp"
#include "estimator/model/nnls.hpp"

namespace dlh {

using nlohmann::json;

const std::vector<std::string>& TimeTermNames() {
  static const std::vector<std::string> names{"overhead_s",
                                              "conv_s_per_flop",
                                              "dense_s_per_flop",
                                              "elementwise_s_per_flop",
                                              "update_s_per_param",
                                              "im2col_s_per_value",
                                              "conv_out_s_per_value",
                                              "conv_layer_s",
                                              "dense_layer_s",
                                              "conv_sample_s",
                                              "conv_weight_s_per_value"};
  return names;
}

std::vector<double> TimeTerms(const ModelFeatures& f, int64_t batch, bool cpu_engine) {
  const double b = double(batch);
  // What the CPU engine runs inside a convolution or never runs (features.hpp) is no work
  // of its own there; a GPU engine runs all of it.
  const double cpu = cpu_engine ? 1.0 : 0.0;
  const double other_not_run =
      cpu * (f.cpu_fused_flops_fwd + f.cpu_fused_flops_bwd + f.cpu_skipped_other_flops_bwd);
  return {
      1.0,
      b * std::max(0.0, f.conv_flops_fwd + f.conv_flops_bwd - cpu * f.cpu_skipped_conv_flops_bwd),
      b * std::max(0.0,
                   f.dense_flops_fwd + f.dense_flops_bwd - cpu * f.cpu_skipped_dense_flops_bwd),
      b * std::max(0.0, f.other_flops_fwd + f.other_flops_bwd - other_not_run), f.params,
      b * std::max(0.0, f.conv_workspace_elements - cpu * f.cpu_skipped_workspace_elements),
      b * f.conv_output_elements, double(f.conv_layers), double(f.dense_layers),
      // The CPU engine's one-sample-at-a-time convolutions (features.hpp,
      // conv_weight_elements); a GPU engine convolves the batch at once, so it has neither.
      cpu * b * double(f.conv_layers), cpu * b * f.conv_weight_elements};
}

double CalibratedActivationSeconds(const Calibration& c, const std::vector<double>& coef,
                                   const ModelFeatures& f, double batch, double flops_ratio) {
  if (coef.size() <= size_t(kElementwiseTerm)) return 0;
  return batch * ActivationExtraSecondsPerSample(c.activation_cost, f,
                                                 coef[size_t(kElementwiseTerm)], flops_ratio);
}

double CalibratedActivationSeconds(const Calibration& c, const ModelFeatures& f, int64_t batch) {
  return CalibratedActivationSeconds(c, c.model.coef, f, double(batch), 1);
}

double TimeModel::seconds(const ModelFeatures& f, int64_t batch) const {
  if (coef.size() != size_t(kTimeTerms))
    throw EstimateError("time model for " + (device.empty() ? std::string("?") : device) + " has " +
                        std::to_string(coef.size()) + " coefficients, need " +
                        std::to_string(kTimeTerms));
  const std::vector<double> x = TimeTerms(f, batch, CpuEngineDevice(device));
  double t = 0;
  for (int j = 0; j < kTimeTerms; ++j) t += coef[j] * x[j];
  return t;
}

// ---------------------------------------------------------------- fit

namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

std::string Num(double d) { return json(d).dump(); }

struct Design {
  MatrixXd A;  // rows TimeTerms / t (relative error), columns scaled to unit norm
  VectorXd y;  // ones
  VectorXd scale;
  std::vector<int> terms;  // the term of each column of A
};

// The weighted, column-scaled design of the given samples. Off the CPU engine, the CPU-only
// terms (c9, c10: no work in any row) are left out, their coefficients 0. Throws
// EstimateError (prefixed by `what`) when another column is zero or the columns are
// linearly dependent.
Design MakeDesign(const std::vector<std::vector<double>>& rows, const std::vector<double>& t,
                  const std::vector<size_t>& use, bool cpu_engine, const std::string& what) {
  const auto m = Eigen::Index(use.size());
  const auto& names = TimeTermNames();
  Design d;
  std::string zero;
  for (int j = 0; j < kTimeTerms; ++j) {
    bool work = false;
    for (size_t i : use) work = work || rows[i][j] != 0;
    if (work)
      d.terms.push_back(j);
    else if (cpu_engine || j < kFirstCpuOnlyTerm)
      zero += (zero.empty() ? "" : ", ") + names[j];
  }
  if (!zero.empty())
    throw EstimateError(what + "the design is rank-deficient: " + zero +
                        " has no work in any sample; the sweep must exercise every term");
  const auto n = Eigen::Index(d.terms.size());
  d.A.resize(m, n);
  d.y = VectorXd::Ones(m);
  for (Eigen::Index i = 0; i < m; ++i)
    for (Eigen::Index k = 0; k < n; ++k) d.A(i, k) = rows[use[i]][d.terms[k]] / t[use[i]];
  d.scale.resize(n);
  for (Eigen::Index k = 0; k < n; ++k) {
    d.scale(k) = 1 / d.A.col(k).norm();
    d.A.col(k) *= d.scale(k);
  }
  Eigen::ColPivHouseholderQR<MatrixXd> qr(d.A);
  qr.setThreshold(1e-10);
  if (qr.rank() < n) {
    // The columns the pivoting left for last are the ones the others already explain.
    std::string dependent;
    for (Eigen::Index k = qr.rank(); k < n; ++k)
      dependent +=
          (dependent.empty() ? "" : ", ") + names[d.terms[qr.colsPermutation().indices()(k)]];
    throw EstimateError(what + "the design is rank-deficient (rank " + std::to_string(qr.rank()) +
                        " of " + std::to_string(n) + "): " + dependent +
                        " cannot be told apart from the other terms; the samples must vary "
                        "models and batches independently");
  }
  return d;
}

// Coefficients (unscaled, >= 0) for the given samples.
std::vector<double> Solve(const std::vector<std::vector<double>>& rows,
                          const std::vector<double>& t, const std::vector<size_t>& use,
                          bool cpu_engine, const std::string& what) {
  const Design d = MakeDesign(rows, t, use, cpu_engine, what);
  // The unconstrained optimum is the constrained one when it is feasible (convexity); it is
  // also the common case, so take it directly and run NNLS only when it is not.
  VectorXd x = d.A.colPivHouseholderQr().solve(d.y);
  if (x.minCoeff() < 0) x = NonNegativeLeastSquares(d.A, d.y);
  std::vector<double> c(kTimeTerms, 0.0);
  for (size_t k = 0; k < d.terms.size(); ++k)
    c[size_t(d.terms[k])] = std::max(0.0, x(Eigen::Index(k))) * d.scale(Eigen::Index(k));
  return c;
}

double Predict(const std::vector<double>& c, const std::vector<double>& row) {
  double s = 0;
  for (int j = 0; j < kTimeTerms; ++j) s += c[j] * row[j];
  return s;
}

// Uniform in [0, bound), without modulo bias, from the raw generator output (so the
// shuffle is the same with every standard library, unlike uniform_int_distribution).
uint64_t Below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t r;
  do r = rng();
  while (r >= limit);
  return r % bound;
}

}  // namespace

namespace {

// The spread of held-out errors as a normal standard deviation: the 90% quantile of
// |ln(measured / predicted)| over 1.645 (a normal's |x| has its 90% quantile at 1.645
// sigma). Not 1.4826 x MAD: the time model's held-out errors are heavy-tailed (most models
// within a few percent, a few off by 20-40%: BENCHMARKS.md, the validation tables), and MAD
// describes the bulk while the band is about the tail, the jobs that would overrun. The
// quantile reads that tail directly and is still robust to the single worst sample. Linear
// interpolation between order statistics.
double RobustLogSigma(std::vector<double> abs_log) {
  if (abs_log.empty()) return 0;
  std::sort(abs_log.begin(), abs_log.end());
  const double at = 0.9 * double(abs_log.size() - 1);
  const size_t lo = size_t(at);
  const size_t hi = std::min(lo + 1, abs_log.size() - 1);
  const double q = abs_log[lo] + (at - double(lo)) * (abs_log[hi] - abs_log[lo]);
  return q / 1.6449;
}

}  // namespace

TimeModel FitTimeModel(const std::string& device, const std::vector<TimingSample>& samples,
                       int folds) {
  const int n = int(samples.size());
  const bool cpu_engine = CpuEngineDevice(device);
  const int terms = cpu_engine ? kTimeTerms : kFirstCpuOnlyTerm;
  if (n < 2 * terms)
    throw EstimateError("too few samples to fit " + std::to_string(terms) + " terms: got " +
                        std::to_string(n) + ", need at least " + std::to_string(2 * terms));
  if (folds < 2 || folds > n)
    throw EstimateError("cross-validation folds must be between 2 and the number of samples (" +
                        std::to_string(n) + "), got " + std::to_string(folds));

  std::vector<std::vector<double>> rows(n);
  std::vector<double> t(n);
  for (int i = 0; i < n; ++i) {
    const TimingSample& s = samples[i];
    const std::string at = "samples[" + std::to_string(i) + "]";
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      throw EstimateError(at + ".seconds: must be a positive number, got " + Num(s.seconds));
    if (s.batch <= 0)
      throw EstimateError(at + ".batch: must be a positive integer, got " +
                          std::to_string(s.batch));
    rows[i] = TimeTerms(s.features, s.batch, cpu_engine);
    for (int j = 0; j < kTimeTerms; ++j)
      if (!(rows[i][j] >= 0) || !std::isfinite(rows[i][j]))
        throw EstimateError(at + ": term " + TimeTermNames()[j] +
                            " must be a non-negative number, got " + Num(rows[i][j]));
    t[i] = s.seconds;
  }

  std::vector<size_t> all(n);
  for (int i = 0; i < n; ++i) all[i] = size_t(i);
  TimeModel model;
  model.device = device;
  model.coef = Solve(rows, t, all, cpu_engine, "cannot fit the time model: ");

  // Quality on the training data, of t itself.
  double mean = 0;
  for (double v : t) mean += v / n;
  double ss_res = 0, ss_tot = 0, ape = 0;
  for (int i = 0; i < n; ++i) {
    const double p = Predict(model.coef, rows[i]);
    ss_res += (p - t[i]) * (p - t[i]);
    ss_tot += (t[i] - mean) * (t[i] - mean);
    ape += std::fabs(p - t[i]) / t[i];
  }
  model.quality.samples = n;
  model.quality.folds = folds;
  // All times equal: R^2 is undefined; call a perfect fit 1, anything else 0.
  model.quality.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1 : 0);
  model.quality.mape = 100 * ape / n;

  // k-fold cross-validation: a fixed-seed Fisher-Yates shuffle, folds of sizes differing
  // by at most one (the first n % folds get the extra sample).
  std::vector<size_t> order = all;
  std::mt19937_64 rng(0x444c48u);  // "DLH"
  for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[Below(rng, i + 1)]);
  double cv_ape = 0;
  std::vector<double> cv_abs_log;  // |ln(measured / predicted)| of every held-out sample
  cv_abs_log.reserve(size_t(n));
  size_t start = 0;
  for (int k = 0; k < folds; ++k) {
    const size_t size = size_t(n / folds + (k < n % folds ? 1 : 0));
    std::vector<size_t> train, test;
    for (size_t p = 0; p < order.size(); ++p)
      (p >= start && p < start + size ? test : train).push_back(order[p]);
    start += size;
    const std::string what =
        "cross-validation fold " + std::to_string(k + 1) + " of " + std::to_string(folds) + ": ";
    if (train.size() < size_t(terms))
      throw EstimateError(what + "only " + std::to_string(train.size()) + " training samples for " +
                          std::to_string(terms) + " terms; use fewer folds");
    const std::vector<double> c = Solve(rows, t, train, cpu_engine, what);
    for (size_t i : test) {
      const double p = Predict(c, rows[i]);
      cv_ape += std::fabs(p - t[i]) / t[i];
      // A fold may predict a non-positive time for a sample far outside its training set:
      // count it as off by the largest factor the band can take (e^3), not as infinite.
      cv_abs_log.push_back(p > 0 ? std::min(3.0, std::fabs(std::log(t[i] / p))) : 3.0);
    }
  }
  model.quality.cv_mape = 100 * cv_ape / n;
  model.quality.cv_log_sigma = RobustLogSigma(cv_abs_log);
  return model;
}

}  // namespace dlh
