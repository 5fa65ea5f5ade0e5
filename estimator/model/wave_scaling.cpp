// DLH estimator — wave scaling of calibrated time models (see wave_scaling.hpp).
#include "estimator/model/wave_scaling.hpp"

#include <cmath>
#include <cstdio>
#include <functional>

#include "common/error.hpp"

namespace dlh {

SpeedRatio PeakRatio(const GpuType& reference, const GpuType& target) {
  return {target.peak_tflops / reference.peak_tflops,
          target.memory_bandwidth_gbs / reference.memory_bandwidth_gbs};
}

TermRate TimeTermRate(int term) {
  // The order of TimeTerms (time_model.cpp): overhead, conv, dense, element-wise,
  // parameters, im2col, conv output tiles, then the per-layer costs, which are launches and
  // library calls like the overhead: kept as they are, as are the per-sample GEMM calls of
  // the CPU engine's convolutions; the weights those calls read are memory. Then the layer
  // model's element-wise layers (a fixed cost each) and the values they move (memory).
  static constexpr TermRate kRates[kLayerTerms] = {
      TermRate::Fixed,  TermRate::Compute, TermRate::Compute, TermRate::Memory, TermRate::Memory,
      TermRate::Memory, TermRate::Compute, TermRate::Fixed,   TermRate::Fixed,  TermRate::Fixed,
      TermRate::Memory, TermRate::Fixed,   TermRate::Memory};
  if (term < 0 || term >= kLayerTerms)
    throw EstimateError("time-model term " + std::to_string(term) + " does not exist");
  return kRates[term];
}

std::vector<double> ScaleCoefficients(const std::vector<double>& coef, SpeedRatio ratio) {
  if (coef.size() != size_t(kTimeTerms) && coef.size() != size_t(kLayerTerms))
    throw EstimateError("time model has " + std::to_string(coef.size()) +
                        " coefficients, expected " + std::to_string(kTimeTerms));
  auto usable = [](double r) { return std::isfinite(r) && r > 0; };
  if (!usable(ratio.flops) || !usable(ratio.bandwidth))
    throw EstimateError("speed ratios must be positive: " + RatioText(ratio));
  std::vector<double> out(coef);
  for (int i = 0; i < int(coef.size()); ++i) {
    const TermRate rate = TimeTermRate(i);
    if (rate == TermRate::Compute) out[size_t(i)] /= ratio.flops;
    if (rate == TermRate::Memory) out[size_t(i)] /= ratio.bandwidth;
  }
  return out;
}

const GpuType* ClosestType(const Cluster& cluster, const GpuType& target,
                           const std::function<bool(const GpuType&)>& candidate) {
  const GpuType* best = nullptr;
  double best_distance = 0;
  for (const GpuType& g : cluster.gpu_types) {
    // A CPU node's figures are a whole node's, timed by the CPU engine: no GPU type's
    // reference, nor the other way round.
    if (g.name == target.name || g.cpu != target.cpu || !candidate(g)) continue;
    const SpeedRatio r = PeakRatio(g, target);
    const double distance = std::pow(std::log(r.flops), 2) + std::pow(std::log(r.bandwidth), 2);
    // Exact comparison on purpose: two references with identical peaks tie, and the name
    // decides, whatever their order in the file.
    if (!best || distance < best_distance || (distance == best_distance && g.name < best->name)) {
      best = &g;
      best_distance = distance;
    }
  }
  return best;
}

const GpuType* ClosestCalibrated(const Cluster& cluster, const GpuType& target) {
  return ClosestType(cluster, target, [](const GpuType& g) { return !g.calibration.empty(); });
}

std::string RatioText(SpeedRatio ratio) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "FLOP/s x%.2f, bandwidth x%.2f", ratio.flops, ratio.bandwidth);
  return buf;
}

}  // namespace dlh
