// DLH — layer fusion: the layers right after a convolution that it runs itself.
//
// A CNN's largest activations are its convolutions' outputs, and a ReLU and a max pool after
// a convolution each pass over them again: forward, and backward (the pool's gradient is
// zeroed and scattered, the ReLU's reads three tensors of that size). The convolution holds
// each sample's output in cache anyway. Fused, it clamps that output, pools it and keeps only
// the pooled values and their winners; backward, it rebuilds the sample's full-size output
// gradient in cache (each winner gets its pooled gradient where its value is positive, every
// other cell 0) before its GEMMs. The network skips the fused layers.
//
// The values are bit-identical to the layers run one by one: max(z, 0) is the same float,
// the pool is the same code (pool2x2.hpp) on the same values, relu'(z) = (z > 0) is
// (max(z, 0) > 0), and a winner's gradient is still 0 + its pooled gradient.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "launcher/nn/layer.hpp"

namespace dlh {

// Fuses into layers[i] the layers right after it that it can run itself, marks them, and
// returns how many: after a convolution, a ReLU, then (after the convolution or its ReLU) a
// max pool with a 2x2 window, stride 2 and no padding.
size_t FuseFollowers(const std::vector<std::unique_ptr<Layer>>& layers, size_t i);

// Whether `layer` was fused into a layer before it: the network neither runs it nor keeps
// its output (the layer that runs it produces that output).
bool FusedIntoPrevious(const Layer& layer);

}  // namespace dlh
