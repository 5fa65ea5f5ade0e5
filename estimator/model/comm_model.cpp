// DLH estimator — the alpha-beta model of allreduce time.
#include "estimator/model/comm_model.hpp"

#include <algorithm>

namespace dlh {

namespace {

double BetaOf(double bandwidth_gbs) {
  return bandwidth_gbs > 0 ? 1.0 / (bandwidth_gbs * 1e9) : 0.0;
}

}  // namespace

AlphaBeta AlphaBeta::from_link(const Link& link) {
  AlphaBeta ab;
  ab.alpha_s = link.latency_us * 1e-6;
  ab.beta_s_per_byte = BetaOf(link.bandwidth_gbs);
  for (const LinkRegime& r : link.regimes)
    ab.regimes.push_back({r.up_to_bytes, r.latency_us * 1e-6, BetaOf(r.bandwidth_gbs)});
  return ab;
}

double AlphaBeta::MessageSeconds(double bytes) const {
  if (regimes.empty()) return alpha_s + bytes * beta_s_per_byte;
  double floor = 0;  // the previous regimes' value at their upper limits
  for (size_t i = 0; i + 1 < regimes.size(); ++i) {
    const AlphaBetaRegime& r = regimes[i];
    if (bytes <= r.up_to_bytes) return std::max(floor, r.alpha_s + bytes * r.beta_s_per_byte);
    floor = std::max(floor, r.alpha_s + r.up_to_bytes * r.beta_s_per_byte);
  }
  const AlphaBetaRegime& last = regimes.back();
  return std::max(floor, last.alpha_s + bytes * last.beta_s_per_byte);
}

double RingAllreduceSeconds(double bytes, int ranks, const AlphaBeta& link) {
  if (ranks <= 1 || !(bytes > 0)) return 0;
  const double p = ranks;
  // Without regimes: the single-pair formula as written in the header, unchanged.
  if (link.regimes.empty())
    return 2 * (p - 1) * link.alpha_s + 2 * (p - 1) / p * bytes * link.beta_s_per_byte;
  return 2 * (p - 1) * link.MessageSeconds(bytes / p);
}

double HierarchicalAllreduceSeconds(double bytes, int gpus_per_node, int nodes,
                                    const AlphaBeta& intra, const AlphaBeta& inter) {
  if (!(bytes > 0)) return 0;
  if (nodes <= 1) return RingAllreduceSeconds(bytes, gpus_per_node, intra);
  if (gpus_per_node <= 1) return RingAllreduceSeconds(bytes, nodes, inter);
  // Reduce-scatter plus all-gather inside the node move the same bytes as an intra-node
  // ring allreduce; between them each GPU allreduces its 1/g shard across the nodes.
  return RingAllreduceSeconds(bytes, gpus_per_node, intra) +
         RingAllreduceSeconds(bytes / gpus_per_node, nodes, inter);
}

double FlatNcclAllreduceSeconds(double bytes, int gpus_per_node, int nodes, const AlphaBeta& intra,
                                const AlphaBeta& inter) {
  if (!(bytes > 0)) return 0;
  if (nodes <= 1) return RingAllreduceSeconds(bytes, gpus_per_node, intra);
  const int p = gpus_per_node * nodes;
  const double message = bytes / p;
  const double step = std::max(gpus_per_node > 1 ? intra.MessageSeconds(message) : 0.0,
                               inter.MessageSeconds(message));
  return 2.0 * (p - 1) * step;
}

double StagedHybridAllreduceSeconds(double bytes, int gpus_per_node, int nodes,
                                    const AlphaBeta& intra, const AlphaBeta& inter,
                                    const AlphaBeta& host_copy) {
  if (!(bytes > 0)) return 0;
  const double g = std::max(gpus_per_node, 1);
  double t = RingAllreduceSeconds(bytes, gpus_per_node, intra);
  if (nodes <= 1) return t;
  t += 2 * host_copy.MessageSeconds(bytes / g);
  t += 2.0 * (nodes - 1) * inter.MessageSeconds(bytes / nodes);
  return t;
}

}  // namespace dlh
