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

// The GPU engine's two algorithms on m nodes of g GPUs, with the network link per node (its
// NICs together), as `dlh-estimate scaling` compares them (issue 42):
//
// NCCL's flat ring over all p = g m ranks. NCCL runs one ring per channel, each leaving the
// node through its own NIC, so a ring step is as slow as the slower of the GPU link and the
// node's network; each of the 2 (p-1) steps sends n/p bytes:
//   t = 2 (p-1) max(a_in + (n/p) b_in, a_x + (n/p) b_x)            (one node: the intra ring)
// NCCL's tree algorithm, which it may pick instead, is not modelled: across few nodes it can
// move up to twice the ring's network bandwidth, so this is the flat path's upper bound.
double FlatNcclAllreduceSeconds(double bytes, int gpus_per_node, int nodes, const AlphaBeta& intra,
                                const AlphaBeta& inter);
// DLH's hierarchical allreduce on GPUs: reduce-scatter and all-gather in the node (an intra
// ring's bytes), each GPU's 1/g shard copied to pinned host memory and back (`host_copy`), and
// the g shards' cross-node rings at once, sharing the node's network (g messages of n/(g m)
// bytes go through the NICs as one of n/m):
//   t = ring(n, g, intra) + 2 (a_c + (n/g) b_c) + 2 (m-1) (a_x + (n/m) b_x)
// Summed: the pipeline over buckets overlaps the stages of different buckets, which this
// upper bound leaves out, as the flat path's overlap with backward.
double StagedHybridAllreduceSeconds(double bytes, int gpus_per_node, int nodes,
                                    const AlphaBeta& intra, const AlphaBeta& inter,
                                    const AlphaBeta& host_copy);

}  // namespace dlh
