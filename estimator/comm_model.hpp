// DLH estimator — the alpha-beta model of allreduce time (Hockney; Thakur, Rabenseifner &
// Gropp 2005 for ring costs). Used for the gradient allreduce of every step.
//
// Flat ring over p ranks, n bytes, slowest link (alpha s, beta s/byte):
//   t = 2 (p-1) alpha + 2 (p-1)/p * n * beta
// Hierarchical (g GPUs per node, m nodes; Horovod's scheme): intra-node reduce-scatter,
// cross-node allreduce of each 1/g shard, intra-node all-gather:
//   t = 2 (g-1) a_in + 2 (g-1)/g n b_in  +  2 (m-1) a_x + 2 (m-1)/m (n/g) b_x
#pragma once

#include <vector>

#include "estimator/cluster.hpp"

namespace dlh {

struct AlphaBeta {
  double alpha_s = 0;          // latency per message, seconds
  double beta_s_per_byte = 0;  // inverse bandwidth
  static AlphaBeta from_link(const Link& link);
};

double RingAllreduceSeconds(double bytes, int ranks, const AlphaBeta& link);
double HierarchicalAllreduceSeconds(double bytes, int gpus_per_node, int nodes,
                                    const AlphaBeta& intra, const AlphaBeta& inter);

// Fits alpha and beta of the flat ring formula to measured (bytes, seconds) points of an
// allreduce over `ranks` ranks (least squares, relative error). Throws EstimateError with
// fewer than 3 points or a non-positive result.
struct AllreducePoint {
  double bytes = 0;
  double seconds = 0;
};
AlphaBeta FitAlphaBeta(const std::vector<AllreducePoint>& points, int ranks);

}  // namespace dlh
