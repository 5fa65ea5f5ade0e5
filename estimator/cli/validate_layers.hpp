// DLH — `dlh-estimate validate --layers`: how well a CPU calibration divides a step among
// its layers, on validation models (none of them in the sweep the layer model was fitted to).
#pragma once

#include <vector>

#include "estimator/calibrate/calibrate.hpp"
#include "estimator/model/time_model.hpp"

namespace dlh {

// Times every model's layers one by one (`rounds` times, interleaved; each layer's median)
// on `threads`, and prints for each model the largest error over its cuts (the share of
// its step that the layers before a cut take, predicted against measured: what sets a
// pipeline's stage balance) by the step-time model and by the layer model, then their means.
// Throws UsageError for a calibration of another device or without a layer model.
int ValidateLayers(const Calibration& c, const std::vector<SweepEntry>& models, int threads,
                   int rounds, bool markdown);

}  // namespace dlh
