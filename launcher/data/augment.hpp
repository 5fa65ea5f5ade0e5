// DLH — data augmentation of training samples (the spec's "augment"): a random crop of the
// zero-padded image and a random horizontal flip, as torchvision's RandomCrop(padding) and
// RandomHorizontalFlip. The draw of each sample is a pure function of (seed, epoch, sample
// index in the data set): the same whichever rank reads the sample, whatever the prefetch
// depth, and again after a resume.
#pragma once

#include <cstdint>
#include <vector>

#include "common/spec.hpp"

namespace dlh {

// The crop offsets and the flip of one sample: rows and columns [dy - P, dy - P + H) and
// [dx - P, dx - P + W) of the image (outside it: 0), then mirrored left to right if flip.
struct AugmentDraw {
  int dy = 0, dx = 0;  // in [0, 2P]
  bool flip = false;
};
AugmentDraw DrawAugment(const AugmentSpec& augment, uint64_t seed, int64_t epoch, int64_t sample);

// Applies `draw` to one C x H x W image in place; `scratch` is reused between calls.
void ApplyAugment(const AugmentDraw& draw, int crop_padding, const Shape3& shape, float* image,
                  std::vector<float>& scratch);

}  // namespace dlh
