// DLH — bf16 mixed precision (the spec's "precision": "bf16"): the conversions around the
// convolutions and GEMMs, and the transient memory their bf16 operands live in.
//
// The GPU layers keep fp32 everywhere between them: activations, gradients, normalisation,
// loss, parameters and optimizer state. A convolution or dense layer in bf16 converts its
// operands (input, weights, output gradient) to bf16 just before its cuDNN or cuBLAS call,
// which accumulates in fp32, and converts what comes back in bf16 (a convolution's output and
// gradients; cuBLAS writes fp32 itself) to fp32. The weights stay the fp32 masters; their
// bf16 copies are made per call, from the values the last update left.
//
// The bf16 operands of one call are transient: layers run one after another on the compute
// stream, so every layer carves them from one arena (GpuContext::transient), sized by the
// largest call when the engine plans its batch (GrowTransient). Stream order keeps a later
// layer's conversions behind an earlier layer's use of the same bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace dlh {
namespace cuda {

struct GpuContext;

using bf16 = __nv_bfloat16;

// out[i] = in[i] rounded to the nearest bf16 (ties to even), and back (exact).
void ToBf16(const float* in, bf16* out, size_t count, cudaStream_t stream);
void FromBf16(const bf16* in, float* out, size_t count, cudaStream_t stream);

// Bytes of an arena that holds arrays of these bf16 counts, each 256-byte aligned.
size_t TransientBytes(std::initializer_list<size_t> counts);

// Makes c's transient arena hold `bytes`, retiring the old one as GrowWorkspace does.
void GrowTransient(GpuContext* c, size_t bytes);

// Pointers to arrays of these bf16 counts in c's arena, in order. The layers plan their
// room when the engine is built (GrowTransient); a call that needs more grows the arena
// then, without a synchronisation (the old one is retired, not freed).
std::vector<bf16*> CarveTransient(GpuContext* c, std::initializer_list<size_t> counts);

}  // namespace cuda
}  // namespace dlh
