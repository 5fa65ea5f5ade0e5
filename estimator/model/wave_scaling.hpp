// DLH estimator — the time model of a GPU type without a calibration, made from another
// type's calibration ("wave scaling": Yu et al., "Habitat: A Runtime-Based Computational
// Performance Predictor for Deep Neural Network Training", USENIX ATC 2021).
//
// Each time-model term (time_model.hpp) is work done at one rate of the device, so a term
// measured on a reference device transfers to a target by the ratio of that rate:
//   overhead_s            unscaled: launch and loop overhead, set by the host, not the peaks
//   conv, dense s/FLOP    compute: x peak_ref / peak_target
//   GEMM output tiles     compute: the extra cost of short inner dimensions is time inside
//                         the GEMM kernel (accumulator set-up, packing, edge tiles), spent
//                         by the same units at the same rate as its FLOPs
//   element-wise, params, im2col
//                         memory: x bandwidth_ref / bandwidth_target
// Habitat scales measured kernels the same way (compute-bound ones by the ratio of peak
// FLOP/s, memory-bound ones by memory bandwidth); here the split comes from the model's
// terms instead of from kernel profiles.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "estimator/cluster/cluster.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

// How much faster the target is than the reference (target / reference, > 0).
struct SpeedRatio {
  double flops = 1;
  double bandwidth = 1;
};

// peak_tflops and memory_bandwidth_gbs of `target` over those of `reference`.
SpeedRatio PeakRatio(const GpuType& reference, const GpuType& target);

enum class TermRate { Fixed, Compute, Memory };
// term in [0, kLayerTerms): TimeTerms', then the layer model's own (layer_time_model.hpp).
TermRate TimeTermRate(int term);

// The coefficients for the target: compute terms / ratio.flops, memory terms /
// ratio.bandwidth, the overhead unchanged. Throws EstimateError when `coef` has neither
// kTimeTerms values (a step-time model) nor kLayerTerms (a layer model) or a ratio is not
// positive and finite.
std::vector<double> ScaleCoefficients(const std::vector<double>& coef, SpeedRatio ratio);

// The calibrated GPU type of `cluster` (other than `target`) closest to `target` in
// (ln peak FLOP/s, ln bandwidth): the smallest sum of squared log ratios; ties go to the
// name first in byte order, so the choice never depends on the file's order. nullptr when
// no other type has a calibration.
const GpuType* ClosestCalibrated(const Cluster& cluster, const GpuType& target);

// The same choice among the types `candidate` accepts (ClosestCalibrated: those with a
// calibration; a profile set: the measured types).
const GpuType* ClosestType(const Cluster& cluster, const GpuType& target,
                           const std::function<bool(const GpuType&)>& candidate);

// "FLOP/s x0.40, bandwidth x0.50"
std::string RatioText(SpeedRatio ratio);

}  // namespace dlh
