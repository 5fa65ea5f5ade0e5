// DLH estimator — non-negative least squares, min |A x - y| subject to x >= 0 (Lawson &
// Hanson 1974, "Solving Least Squares Problems", ch. 23): the step-time model's and the layer
// model's fits (time_model.cpp, layer_time_model.cpp), whose coefficients are times per unit
// of work and must not come out negative.
#pragma once

#include <Eigen/Dense>
#include <vector>

namespace dlh {

// A must have full column rank (the callers check it). Columns of about unit norm keep the
// tolerance meaningful.
Eigen::VectorXd NonNegativeLeastSquares(const Eigen::MatrixXd& A, const Eigen::VectorXd& y);

// The same for a few columns given as rows (rows[r][j]), each column scaled to unit norm for
// the solve and back; a column of zeros gets 0. The nonzero columns must be independent.
std::vector<double> NonNegativeLeastSquares(const std::vector<std::vector<double>>& rows,
                                            const std::vector<double>& y);

}  // namespace dlh
