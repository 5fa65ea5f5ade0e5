// DLH — a convolution's column copies on their own, for `dlh-estimate profile`.
//
// The engine runs a convolution as im2col + GEMM (conv2d.cpp): per sample and row tile, it
// copies the input under every kernel tap into a column matrix (im2col), forward and again
// backward, and folds the column gradient back into the input gradient (col2im). These
// copies are part of the design as much as the GEMMs are, so the profile times them alone,
// on the very tiles the engine cuts, to place the floor of the design.
#pragma once

#include <vector>

#include "launcher/nn/layer.hpp"

namespace dlh {

// One sample's column copies of one training step of the convolution `conv`: im2col of every
// tile, again where `backward`, and col2im of every tile where `grad_in`. `sample` is one
// input sample; `scratch` and `grad_sample` are resized as needed. Throws Error where `conv`
// is not a convolution.
void RunColumnCopies(const Layer& conv, const float* sample, bool backward, bool grad_in,
                     std::vector<float>& scratch, std::vector<float>& grad_sample);

}  // namespace dlh
