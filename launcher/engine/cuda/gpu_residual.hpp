// DLH — the residual block on the GPU: the CPU engine's Residual (launcher/nn/layers/
// residual.cpp) on device memory. Each path is a GpuStack of its own layers; the block adds
// their outputs (a copy and cuBLAS's saxpy: element by element, the same bits as the CPU's
// sum), and backward gives both paths the block's output gradient and adds their input
// gradients. Parameters arrive by the CPU's names ("main.00.conv2d/weight", nested blocks
// "main.01.residual/shortcut.00.conv2d/bias"), each path layer taking its own.
#pragma once

#include <memory>
#include <string>

#include "launcher/engine/cuda/gpu_layers.hpp"

namespace dlh {
namespace cuda {

// `spec` is a residual block whose per-sample input is `in`; the paths' layers are made by
// MakeGpuLayer, so a block may hold blocks. Throws SpecError where a path does not fit.
std::unique_ptr<GpuLayer> MakeGpuResidual(const LayerSpec& spec, const Shape3& in, int max_batch,
                                          GpuContext* context, const std::string& name);

}  // namespace cuda
}  // namespace dlh
