// DLH estimator — the alpha-beta model of allreduce time and its fit.
#include "estimator/comm_model.hpp"

#include <cmath>
#include <string>

#include "common/error.hpp"

namespace dlh {

AlphaBeta AlphaBeta::from_link(const Link& link) {
  AlphaBeta ab;
  ab.alpha_s = link.latency_us * 1e-6;
  ab.beta_s_per_byte = link.bandwidth_gbs > 0 ? 1.0 / (link.bandwidth_gbs * 1e9) : 0.0;
  return ab;
}

double RingAllreduceSeconds(double bytes, int ranks, const AlphaBeta& link) {
  if (ranks <= 1 || !(bytes > 0)) return 0;
  const double p = ranks;
  return 2 * (p - 1) * link.alpha_s + 2 * (p - 1) / p * bytes * link.beta_s_per_byte;
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

AlphaBeta FitAlphaBeta(const std::vector<AllreducePoint>& points, int ranks) {
  if (ranks < 2)
    throw EstimateError("allreduce fit: needs at least 2 ranks, got " + std::to_string(ranks));
  if (points.size() < 3)
    throw EstimateError("allreduce fit: too few points to fit alpha and beta: got " +
                        std::to_string(points.size()) + ", need at least 3");
  // Model t = x1 alpha + x2 beta with x1 = 2(p-1), x2 = 2(p-1)/p n. Minimising the relative
  // error sum ((x1 alpha + x2 beta - t) / t)^2 is ordinary least squares on rows scaled by
  // 1/t with target 1; the 2x2 normal equations are solved directly.
  const double p = ranks;
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const AllreducePoint& pt = points[i];
    if (!(pt.bytes >= 0) || !std::isfinite(pt.bytes) || !(pt.seconds > 0) ||
        !std::isfinite(pt.seconds))
      throw EstimateError("allreduce fit: point " + std::to_string(i) +
                          " needs bytes >= 0 and seconds > 0, got " + std::to_string(pt.bytes) +
                          " bytes, " + std::to_string(pt.seconds) + " s");
    const double a = 2 * (p - 1) / pt.seconds;
    const double b = 2 * (p - 1) / p * pt.bytes / pt.seconds;
    saa += a * a;
    sab += a * b;
    sbb += b * b;
    sa += a;
    sb += b;
  }
  const double det = saa * sbb - sab * sab;
  if (!(det > 1e-12 * saa * sbb))
    throw EstimateError(
        "allreduce fit: the points need at least 2 different message sizes to separate "
        "latency from bandwidth");
  AlphaBeta ab;
  ab.alpha_s = (sa * sbb - sb * sab) / det;
  ab.beta_s_per_byte = (saa * sb - sab * sa) / det;
  if (!(ab.alpha_s > 0) || !(ab.beta_s_per_byte > 0))
    throw EstimateError("allreduce fit: non-positive result (alpha " + std::to_string(ab.alpha_s) +
                        " s, beta " + std::to_string(ab.beta_s_per_byte) +
                        " s/byte): the timings do not follow the alpha-beta model");
  return ab;
}

}  // namespace dlh
