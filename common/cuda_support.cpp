// DLH — what the CUDA engine can train (see cuda_support.hpp).
#include "common/cuda_support.hpp"

#include <cstdio>
#include <string>

namespace dlh {
namespace {

// Whether launcher/engine/cuda/gpu_layers.cpp (MakeGpuLayer) has a layer of this kind.
bool CudaRuns(LayerKind kind) {
  switch (kind) {
    case LayerKind::Conv2d:
    case LayerKind::MaxPool2d:
    case LayerKind::Dense:
    case LayerKind::Relu:
    case LayerKind::Flatten:
    case LayerKind::Dropout:
    case LayerKind::BatchNorm:
      return true;
    case LayerKind::AvgPool2d:
    case LayerKind::GlobalAvgPool2d:
    case LayerKind::Gelu:
    case LayerKind::Silu:
    case LayerKind::Residual:
      return false;
  }
  return false;
}

}  // namespace

std::string CudaEngineUnsupported(const TrainSpec& spec) {
  const std::string origin = spec.origin.empty() ? std::string("spec") : spec.origin;
  // The top-level list is enough while a residual block is refused whole; its paths'
  // layers are then never reached.
  for (size_t i = 0; i < spec.layers.size(); ++i)
    if (!CudaRuns(spec.layers[i].kind))
      return origin + ": layers[" + std::to_string(i) + "]: " + LayerKindName(spec.layers[i].kind) +
             " is not supported by the CUDA engine yet";
  if (spec.label_smoothing != 0) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", spec.label_smoothing);
    return origin + ": label_smoothing: " + value +
           " is not supported by the CUDA engine yet (its loss has no smoothing)";
  }
  return "";
}

}  // namespace dlh
