// DLH estimator — smooth activations beyond the time model's price (activation_cost.hpp).
#include "estimator/model/activation_cost.hpp"

#include "estimator/model/timed_part_json.hpp"

namespace dlh {

namespace {

// ratio: the device's arithmetic speed over the calibration's; rate: the model's own price
// of an element-wise FLOP on it.
double ExtraOf(const ActivationCost& c, const LayerCost& l, double rate, double ratio) {
  double forward = 0, backward = 0;
  if (l.kind == LayerKind::Gelu) {
    forward = c.gelu_forward_s;
    backward = c.gelu_backward_s;
  } else if (l.kind == LayerKind::Silu) {
    forward = c.silu_forward_s;
    backward = c.silu_backward_s;
  } else {
    double sum = 0;  // a residual block's paths; nothing for any other layer
    for (const LayerCost& nested : l.layers) sum += ExtraOf(c, nested, rate, ratio);
    for (const LayerCost& nested : l.shortcut) sum += ExtraOf(c, nested, rate, ratio);
    return sum;
  }
  // features.cpp counts no backward FLOPs for the bottom layer, whose input gradient the
  // engine never computes.
  const double measured = l.out_elements * (forward + (l.flops_bwd > 0 ? backward : 0));
  return measured / ratio - (l.flops_fwd + l.flops_bwd) * rate;
}

}  // namespace

double ActivationExtraSecondsPerSample(const ActivationCost& cost, const ModelFeatures& features,
                                       double elementwise_s_per_flop, double flops_ratio) {
  if (cost.empty() || !(flops_ratio > 0)) return 0;
  double extra = 0;
  for (const LayerCost& l : features.layers)
    extra += ExtraOf(cost, l, elementwise_s_per_flop, flops_ratio);
  return extra;
}

nlohmann::json ActivationCostToJson(const ActivationCost& cost) {
  return {{"values", cost.values},
          {"seconds_per_value",
           {{"gelu_forward", cost.gelu_forward_s},
            {"gelu_backward", cost.gelu_backward_s},
            {"silu_forward", cost.silu_forward_s},
            {"silu_backward", cost.silu_backward_s}}}};
}

ActivationCost ActivationCostFromJson(const nlohmann::json& j, const std::string& origin) {
  const TimedPart part =
      ReadTimedPart(j, origin + ": activation_cost", "values", "seconds_per_value",
                    {"gelu_forward", "gelu_backward", "silu_forward", "silu_backward"});
  ActivationCost c;
  c.values = part.count;
  c.gelu_forward_s = part.seconds.at("gelu_forward");
  c.gelu_backward_s = part.seconds.at("gelu_backward");
  c.silu_forward_s = part.seconds.at("silu_forward");
  c.silu_backward_s = part.seconds.at("silu_backward");
  return c;
}

}  // namespace dlh
