// DLH estimator — what a job's smooth activations (GELU, SiLU) cost a step beyond the time
// model's price of them.
//
// The step-time model prices an element-wise layer by its FLOPs at one rate
// (elementwise_s_per_flop, time_model.hpp), fitted to the sweep, whose activations are all
// ReLUs: a comparison or a mask per element, a pass over memory. GELU and SiLU call erf or
// exp for every element, which the CPU engine does one element at a time (launcher/nn/
// layers/smooth_activation.cpp), and features.cpp counts them as a few FLOPs each by
// convention. Measured on the project's 2-core host (2026-12-04, `dlh-estimate profile` of
// the judged residual MLP, val-resmlp-784-512x2-b64, 2 threads): a GELU over 512 x 64 values
// took 0.24-0.27 ms forward and backward, 7.7 ns a value, where the model charged 22 FLOPs
// at the element-wise rate, about 1.9 ns; the five GELUs were a quarter of that step, and
// the model put the step 28-41% short (the most of any judged model). So a CPU calibration
// times the engine's own GELU and SiLU layers on one array (calibrate,
// MeasureActivationCost), and a job's step gains, for each such layer, its values x the
// measured seconds a value, less what the model already charges for its FLOPs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "estimator/model/features.hpp"

namespace dlh {

struct ActivationCost {
  int64_t values = 0;  // the array timed; 0: not measured (older files, GPUs)
  // Seconds per value at the calibration's threads, each pass apart (the layer at a model's
  // bottom skips its backward, as the engine does).
  double gelu_forward_s = 0, gelu_backward_s = 0;
  double silu_forward_s = 0, silu_backward_s = 0;
  bool empty() const { return values <= 0; }
};

// Seconds per sample that `features`' GELU and SiLU layers (those inside residual blocks
// included; ModelFeatures::layers must hold the layers) cost beyond their FLOPs at
// `elementwise_s_per_flop`, the price the step-time model in use puts on them (time_model.hpp,
// kElementwiseTerm), on a device `flops_ratio` times the calibration's arithmetic speed (the
// functions are arithmetic, not memory passes; a scaled model moves them so). Negative where
// the measurement is below the model's price; 0 without a measurement or such a layer.
double ActivationExtraSecondsPerSample(const ActivationCost& cost, const ModelFeatures& features,
                                       double elementwise_s_per_flop, double flops_ratio = 1);

// The calibration file's "activation_cost" object and back. FromJson throws EstimateError
// naming `origin` and the field (one line) for a damaged one.
nlohmann::json ActivationCostToJson(const ActivationCost& cost);
ActivationCost ActivationCostFromJson(const nlohmann::json& j, const std::string& origin);

}  // namespace dlh
