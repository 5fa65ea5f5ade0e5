// DLH — `dlh-estimate gpu-layers`: the GPU layer model (estimator/model/gpu_layer_model.hpp)
// fitted offline to a GPU calibration's sweep, judged on saved validation measurements, and
// carried to another GPU type by its published peaks.
#pragma once

#include <string>
#include <vector>

namespace dlh {

// gpu-layers --calibration CAL --peaks SPEC [--measured FILE [--set S]] [--predict SPEC
// --out FILE]: fits, reports the fit's and (with --measured) the validation models' MAPE
// beside the linear model's, and writes predictions for another type.
int GpuLayersCommand(const std::vector<std::string>& args);

}  // namespace dlh
