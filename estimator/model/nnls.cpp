// DLH estimator — non-negative least squares (nnls.hpp).
#include "estimator/model/nnls.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace dlh {

using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

// Least squares on the columns of A marked in `use`; the others come out 0.
VectorXd SolveSubset(const MatrixXd& A, const VectorXd& y, const std::vector<bool>& use) {
  std::vector<int> cols;
  for (int j = 0; j < int(use.size()); ++j)
    if (use[j]) cols.push_back(j);
  VectorXd x = VectorXd::Zero(A.cols());
  if (cols.empty()) return x;
  MatrixXd S(A.rows(), Eigen::Index(cols.size()));
  for (size_t k = 0; k < cols.size(); ++k) S.col(Eigen::Index(k)) = A.col(cols[k]);
  const VectorXd s = S.colPivHouseholderQr().solve(y);
  for (size_t k = 0; k < cols.size(); ++k) x(cols[k]) = s(Eigen::Index(k));
  return x;
}

}  // namespace

// Why NNLS rather than clamping negative coefficients to 0 and refitting the rest: the
// problem is convex, and the active-set method stops at its exact optimum (the KKT point),
// whereas clamp-and-refit can pin a coefficient at 0 that the optimum wants positive, or
// miss that clamping one makes another negative, and then depends on the order of steps.
// With 5 columns the method needs a handful of small QR solves.
VectorXd NonNegativeLeastSquares(const MatrixXd& A, const VectorXd& y) {
  const int n = int(A.cols());
  VectorXd x = VectorXd::Zero(n);
  std::vector<bool> passive(n, false);
  std::vector<bool> barred(n, false);  // just added and dropped at once: skip once
  // Gradient entries below this are rounding noise (the columns have unit norm).
  const double tol = 1e3 * std::numeric_limits<double>::epsilon() * std::max(1.0, y.norm());
  for (int outer = 0; outer < 10 * n; ++outer) {
    const VectorXd w = A.transpose() * (y - A * x);
    int best = -1;
    for (int j = 0; j < n; ++j)
      if (!passive[j] && !barred[j] && w(j) > tol && (best < 0 || w(j) > w(best))) best = j;
    if (best < 0) break;
    std::fill(barred.begin(), barred.end(), false);
    passive[best] = true;
    for (int inner = 0; inner < 10 * n; ++inner) {
      const VectorXd z = SolveSubset(A, y, passive);
      bool feasible = true;
      for (int j = 0; j < n; ++j) feasible = feasible && (!passive[j] || z(j) > 0);
      if (feasible) {
        x = z;
        break;
      }
      // Step from x towards z as far as feasibility allows; the variable that hits 0 first
      // (and any other at 0) leaves the passive set.
      double alpha = 1;
      int hit = -1;
      for (int j = 0; j < n; ++j) {
        if (!passive[j] || z(j) > 0) continue;
        const double a = x(j) / (x(j) - z(j));
        if (hit < 0 || a < alpha) alpha = a, hit = j;
      }
      x += alpha * (z - x);
      for (int j = 0; j < n; ++j) {
        if (passive[j] && (j == hit || x(j) <= 0)) {
          passive[j] = false;
          x(j) = 0;
          if (j == best) barred[j] = true;
        }
      }
    }
  }
  return x;
}

std::vector<double> NonNegativeLeastSquares(const std::vector<std::vector<double>>& rows,
                                            const std::vector<double>& y) {
  const size_t n = rows.empty() ? 0 : rows.front().size();
  std::vector<double> out(n, 0.0);
  std::vector<Eigen::Index> used;  // the nonzero columns
  std::vector<double> scale;
  for (size_t j = 0; j < n; ++j) {
    double norm = 0;
    for (const std::vector<double>& r : rows) norm += r[j] * r[j];
    if (norm > 0) used.push_back(Eigen::Index(j)), scale.push_back(1 / std::sqrt(norm));
  }
  if (used.empty()) return out;
  MatrixXd A(Eigen::Index(rows.size()), Eigen::Index(used.size()));
  VectorXd b(Eigen::Index(rows.size()));
  for (size_t r = 0; r < rows.size(); ++r) {
    b(Eigen::Index(r)) = y[r];
    for (size_t k = 0; k < used.size(); ++k)
      A(Eigen::Index(r), Eigen::Index(k)) = rows[r][size_t(used[k])] * scale[k];
  }
  const VectorXd x = NonNegativeLeastSquares(A, b);
  for (size_t k = 0; k < used.size(); ++k) out[size_t(used[k])] = x(Eigen::Index(k)) * scale[k];
  return out;
}

}  // namespace dlh
