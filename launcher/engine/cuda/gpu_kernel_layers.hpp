// DLH — the GPU layers that run on DLH's own kernels (kernels.cu) rather than cuDNN's or
// cuBLAS's: average pooling, global average pooling, GELU and SiLU. Each computes what its
// CPU layer (launcher/nn/layers/avgpool2d.cpp, smooth_activation.cpp) does, in a fixed order
// whatever the launch: the pools' backward gathers into each input value, with no atomics.
#pragma once

#include <memory>

#include "launcher/engine/cuda/gpu_layers.hpp"

namespace dlh {
namespace cuda {

// `spec` is an avgpool2d, globalavgpool2d, gelu or silu layer; `in` and `out` its shapes.
std::unique_ptr<GpuLayer> MakeGpuKernelLayer(const LayerSpec& spec, const Shape3& in,
                                             const Shape3& out, GpuContext* context);

}  // namespace cuda
}  // namespace dlh
