// DLH estimator — the alpha-beta model of allreduce time (Hockney; Thakur, Rabenseifner &
// Gropp 2005 for ring costs). Used for the gradient allreduce of every step.
//
// Flat ring over p ranks, n bytes, slowest link (alpha s, beta s/byte):
//   t = 2 (p-1) alpha + 2 (p-1)/p * n * beta  =  2 (p-1) * (alpha + (n/p) beta)
// Hierarchical (g GPUs per node, m nodes; Horovod's scheme): intra-node reduce-scatter,
// cross-node allreduce of each 1/g shard, intra-node all-gather:
//   t = 2 (g-1) a_in + 2 (g-1)/g n b_in  +  2 (m-1) a_x + 2 (m-1)/m (n/g) b_x
//
// Piecewise links (cluster "regimes"): each of the 2 (p-1) ring steps sends one message of
// n/p bytes, and that is the size the link's protocol and caches see, so a ring picks its
// regime by n/p, not by n. In the hierarchical scheme the intra-node phases send n/g and the
// cross-node ring n/(g m). `dlh-estimate comm` fits the regimes with the same rule, so its
// breakpoints are in these message bytes too.
#pragma once

#include <vector>

#include "estimator/cluster/cluster.hpp"

namespace dlh {

struct AlphaBetaRegime {
  double up_to_bytes = 0;  // message bytes, inclusive; ignored in the last regime
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

struct AlphaBeta {
  AlphaBeta() = default;
  AlphaBeta(double alpha, double beta) : alpha_s(alpha), beta_s_per_byte(beta) {}
  double alpha_s = 0;          // latency per message, seconds
  double beta_s_per_byte = 0;  // inverse bandwidth
  // Piecewise model, sorted by up_to_bytes; when not empty it replaces the pair above.
  std::vector<AlphaBetaRegime> regimes;
  static AlphaBeta from_link(const Link& link);

  // Seconds for one message of `bytes`. With regimes: alpha + bytes beta of the regime the
  // size falls in, but never less than the previous regime gave at its upper limit. Regimes
  // fitted separately can step down at a breakpoint (a faster protocol for big messages,
  // or just noise); a model in which a bigger message is faster would make the recommender
  // prefer more bytes per message for no real reason. So the model is the running maximum:
  // monotone non-decreasing in bytes, and equal to each regime's own line wherever that
  // line is above its predecessors' (at measured sizes, usually).
  double MessageSeconds(double bytes) const;
};

double RingAllreduceSeconds(double bytes, int ranks, const AlphaBeta& link);
double HierarchicalAllreduceSeconds(double bytes, int gpus_per_node, int nodes,
                                    const AlphaBeta& intra, const AlphaBeta& inter);

}  // namespace dlh
