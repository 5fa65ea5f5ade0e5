// DLH estimator — fitting the allreduce model (comm_model.hpp) to measured timings
// (`dlh-launch bench-allreduce --json`, read by `dlh-estimate comm`).
#pragma once

#include <cstddef>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/comm_model.hpp"

namespace dlh {

struct AllreducePoint {
  double bytes = 0;  // the whole allreduce, as the benchmark names its sizes
  double seconds = 0;
};

// Fits alpha and beta of the flat ring formula to measured (bytes, seconds) points of an
// allreduce over `ranks` ranks (least squares, relative error). Throws EstimateError with
// fewer than 3 points or a non-positive result.
AlphaBeta FitAlphaBeta(const std::vector<AllreducePoint>& points, int ranks);

struct PiecewiseOptions {
  int max_regimes = 4;
  size_t min_points = 3;  // per regime: 2 parameters need at least one point to spare
  // An extra regime is taken only if it lowers the MAPE by more than this many percentage
  // points (see FitPiecewiseAlphaBeta).
  double penalty_pct = 2;
};

struct PiecewiseFit {
  AlphaBeta model;                // regimes in message bytes (allreduce bytes / ranks)
  std::vector<size_t> first;      // per regime, its first point in bytes order
  double mape_pct = 0;            // of `model` over the points
  std::vector<double> best_mape;  // best MAPE found with 1, 2, ... regimes (-1: none fits)
};

// The piecewise ring model: every split of the points (sorted by bytes) into 1 to
// max_regimes runs of >= min_points each is fitted (each run by relative least squares with
// alpha >= 0, beta > 0; a breakpoint halfway, geometrically, between the message sizes on
// either side) and scored by its MAPE plus penalty_pct per extra regime; the lowest score
// wins, fewer regimes on a tie. Throws EstimateError with fewer than min_points points or
// when no split fits.
PiecewiseFit FitPiecewiseAlphaBeta(std::vector<AllreducePoint> points, int ranks,
                                   const PiecewiseOptions& options = {});

// Mean absolute percentage error of RingAllreduceSeconds(model) over the points.
double AllreduceMapePct(const std::vector<AllreducePoint>& points, int ranks,
                        const AlphaBeta& model);

// The link a cluster description should hold for `model` (regimes or the single pair), its
// numbers rounded to 4 significant digits: the form `dlh-estimate comm` prints to paste.
Link LinkFromModel(const AlphaBeta& model);

}  // namespace dlh
