// DLH — `dlh-estimate features` and `predict`: what a model costs per sample, and its step
// time by a calibration.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// features SPEC [--batch B] [--json]: FLOPs, parameters and activations per layer and in
// all, and the training memory per rank.
int FeaturesCommand(const std::vector<std::string>& args);

// predict SPEC --calibration FILE [--batch B]: the predicted seconds per step (a warning on
// stderr when the calibration is stale).
int PredictCommand(const std::vector<std::string>& args);

}  // namespace dlh
