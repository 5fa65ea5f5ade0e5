// DLH — a spec's network written as a PyTorch module (the model part of `dlh-launch export
// --pytorch`): class Net with one attribute per layer that has parameters, a forward() that
// reads as the spec's list of layers, the spec's initialisation, and DLH_NAMES, which maps a
// DLH checkpoint's arrays (/params, /buffers) to the module's state_dict keys.
#pragma once

#include <string>

#include "common/spec.hpp"

namespace dlh {

struct PyTorchModelCode {
  std::string net_class;  // "class Net(nn.Module): ..." (Python, no trailing blank line)
  std::string dlh_names;  // "DLH_NAMES = {...}"
  std::string summary;    // one line: "2 conv2d, 2 batchnorm, 2 dense (421,642 parameters)"
};

// Throws SpecError when a layer cannot take its input (as LayerShapes does).
PyTorchModelCode WritePyTorchModel(const TrainSpec& spec);

}  // namespace dlh
