// DLH — the GPU dense layer: y = x W^T + b on cuBLASLt, the bias fused into the GEMMs'
// epilogues where cuBLASLt has them (else plain cuBLAS and a bias kernel), and in bf16 on
// bf16 copies of its operands (bf16.hpp). Checked against launcher/nn/layers/dense.cpp by
// tests/gpu/gpu_layers_test.cpp.
#pragma once

#include <memory>

#include "launcher/engine/cuda/gpu_layers.hpp"

namespace dlh {
namespace cuda {

// `in`: the per-sample input shape (flattened); `out`: units x 1 x 1.
std::unique_ptr<GpuLayer> MakeGpuDense(const Shape3& in, const Shape3& out, GpuContext* context);

}  // namespace cuda
}  // namespace dlh
