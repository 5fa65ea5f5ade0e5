// DLH — data augmentation (see augment.hpp).
#include "launcher/data/augment.hpp"

#include <algorithm>

#include "launcher/nn/random.hpp"

namespace dlh {

AugmentDraw DrawAugment(const AugmentSpec& augment, uint64_t seed, int64_t epoch, int64_t sample) {
  // A stream of its own: the key chains the three fields through the mixer, salted so that
  // it shares nothing with the data order or the dropout masks drawn from the same seed.
  uint64_t key = Mix64(seed + kGoldenGamma * 3 + 0x61756720ULL);  // "aug "
  key = Mix64(key ^ (uint64_t(epoch) + kGoldenGamma));
  key = Mix64(key ^ (uint64_t(sample) + kGoldenGamma));
  AugmentDraw d;
  const uint64_t span = uint64_t(2 * augment.crop_padding + 1);
  // Three 21-bit fields of one 64-bit draw; 2P + 1 is small, so the modulo bias (under
  // 2^-11 for P up to 500) does not matter.
  d.dy = int((key & 0x1fffff) % span);
  d.dx = int(((key >> 21) & 0x1fffff) % span);
  d.flip = augment.flip && ((key >> 63) & 1) != 0;
  return d;
}

void ApplyAugment(const AugmentDraw& draw, int crop_padding, const Shape3& shape, float* image,
                  std::vector<float>& scratch) {
  const int H = shape.height, W = shape.width, P = crop_padding;
  if (draw.dy == P && draw.dx == P && !draw.flip) return;  // the image as it is
  const size_t plane = size_t(H) * W;
  scratch.assign(image, image + plane * size_t(shape.channels));
  for (int c = 0; c < shape.channels; ++c) {
    const float* src = scratch.data() + size_t(c) * plane;
    float* dst = image + size_t(c) * plane;
    for (int y = 0; y < H; ++y) {
      const int sy = y + draw.dy - P;
      for (int x = 0; x < W; ++x) {
        const int ox = draw.flip ? W - 1 - x : x;  // the flip mirrors the cropped image
        const int sx = x + draw.dx - P;
        dst[size_t(y) * W + ox] =
            sy >= 0 && sy < H && sx >= 0 && sx < W ? src[size_t(sy) * W + sx] : 0.0f;
      }
    }
  }
}

}  // namespace dlh
