// Tests for launcher/data/augment.cpp and the loader's use of it: the draws are a function of
// (seed, epoch, sample) alone and cover every offset, the crop and flip move pixels where
// torchvision's RandomCrop(padding) and RandomHorizontalFlip would, and an augmenting loader
// gives the same batches whatever its prefetch, rank slice or starting cursor.
#include "launcher/data/augment.hpp"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "launcher/data/loader.hpp"

namespace dlh {
namespace {

TEST(Augment, DrawsAreAFunctionOfSeedEpochAndSample) {
  AugmentSpec a;
  a.crop_padding = 4;
  a.flip = true;
  std::map<int, int> dy_seen, dx_seen;
  int flips = 0, changed_by_epoch = 0;
  const int n = 9000;
  for (int64_t sample = 0; sample < n; ++sample) {
    const AugmentDraw d = DrawAugment(a, 7, 2, sample);
    const AugmentDraw again = DrawAugment(a, 7, 2, sample);
    EXPECT_EQ(d.dy, again.dy);
    EXPECT_EQ(d.dx, again.dx);
    EXPECT_EQ(d.flip, again.flip);
    ASSERT_GE(d.dy, 0);
    ASSERT_LE(d.dy, 8);
    ASSERT_GE(d.dx, 0);
    ASSERT_LE(d.dx, 8);
    ++dy_seen[d.dy];
    ++dx_seen[d.dx];
    flips += d.flip;
    const AugmentDraw other = DrawAugment(a, 7, 3, sample);
    changed_by_epoch += other.dy != d.dy || other.dx != d.dx || other.flip != d.flip;
  }
  // Every offset about equally often (1000 each; 5 sigma is about 150), half flipped.
  ASSERT_EQ(dy_seen.size(), 9u);
  ASSERT_EQ(dx_seen.size(), 9u);
  for (const auto& [offset, count] : dy_seen) EXPECT_NEAR(count, n / 9, 160) << "dy " << offset;
  for (const auto& [offset, count] : dx_seen) EXPECT_NEAR(count, n / 9, 160) << "dx " << offset;
  EXPECT_NEAR(flips, n / 2, 250);
  EXPECT_GT(changed_by_epoch, n * 9 / 10);
  // Without flip, never flipped; without padding, never moved.
  a.flip = false;
  a.crop_padding = 0;
  for (int64_t sample = 0; sample < 100; ++sample) {
    const AugmentDraw d = DrawAugment(a, 7, 2, sample);
    EXPECT_EQ(d.dy, 0);
    EXPECT_EQ(d.dx, 0);
    EXPECT_FALSE(d.flip);
  }
}

// A 2 x 3 x 4 image whose pixel (c, y, x) holds 100 c + 10 y + x + 1 (never 0).
std::vector<float> Ramp(const Shape3& s) {
  std::vector<float> v;
  for (int c = 0; c < s.channels; ++c)
    for (int y = 0; y < s.height; ++y)
      for (int x = 0; x < s.width; ++x) v.push_back(float(100 * c + 10 * y + x + 1));
  return v;
}

TEST(Augment, CropShiftsIntoZeroPaddingAndFlipMirrors) {
  const Shape3 s{2, 3, 4};
  const int P = 2;
  std::vector<float> scratch;
  for (int dy = 0; dy <= 2 * P; ++dy)
    for (int dx = 0; dx <= 2 * P; ++dx)
      for (bool flip : {false, true}) {
        std::vector<float> img = Ramp(s);
        const std::vector<float> original = img;
        ApplyAugment(AugmentDraw{dy, dx, flip}, P, s, img.data(), scratch);
        for (int c = 0; c < 2; ++c)
          for (int y = 0; y < 3; ++y)
            for (int x = 0; x < 4; ++x) {
              // Output (y, x) of the crop is padded-image pixel (y + dy, x + dx), that is
              // image pixel (y + dy - P, x + dx - P); the flip then mirrors the columns.
              const int cx = flip ? 3 - x : x;
              const int sy = y + dy - P, sx = cx + dx - P;
              const float want = sy >= 0 && sy < 3 && sx >= 0 && sx < 4
                                     ? original[size_t((c * 3 + sy) * 4 + sx)]
                                     : 0.0f;
              EXPECT_EQ(img[size_t((c * 3 + y) * 4 + x)], want)
                  << "dy " << dy << " dx " << dx << " flip " << flip << " at " << c << "," << y
                  << "," << x;
            }
      }
}

DataSplit RampSplit(int64_t count, const Shape3& shape) {
  DataSplit s;
  s.count = count;
  s.shape = shape;
  for (int64_t i = 0; i < count; ++i) {
    for (float v : Ramp(shape)) s.images.push_back(v + 1000.0f * float(i));
    s.labels.push_back(int32_t(i % 3));
  }
  return s;
}

LoaderOptions Augmenting(int64_t global, int64_t offset, int64_t batch, int prefetch) {
  LoaderOptions o;
  o.global_batch = global;
  o.rank_offset = offset;
  o.rank_batch = batch;
  o.seed = 5;
  o.prefetch = prefetch;
  o.augment.crop_padding = 1;
  o.augment.flip = true;
  return o;
}

TEST(Augment, LoaderBatchesDoNotDependOnPrefetchRanksOrCursor) {
  const Shape3 shape{2, 3, 4};
  const DataSplit s = RampSplit(40, shape);
  Loader whole(s, Augmenting(8, 0, 8, 0), 0, 0);
  Loader prefetching(s, Augmenting(8, 0, 8, 3), 0, 0);
  Loader rank0(s, Augmenting(8, 0, 3, 2), 0, 0), rank1(s, Augmenting(8, 3, 5, 0), 0, 0);
  Loader resumed(s, Augmenting(8, 0, 8, 2), 1, 2);
  LoaderOptions plain = Augmenting(8, 0, 8, 0);
  plain.augment = AugmentSpec{};
  Loader unaugmented(s, plain, 0, 0);
  int differs = 0;
  for (int step = 0; step < 12; ++step) {
    const Batch a = whole.next();
    EXPECT_EQ(a.images.to_vector(), prefetching.next().images.to_vector());
    std::vector<float> joined = rank0.next().images.to_vector();
    const std::vector<float> second = rank1.next().images.to_vector();
    joined.insert(joined.end(), second.begin(), second.end());
    EXPECT_EQ(a.images.to_vector(), joined) << "step " << step;
    if (step >= 5 + 2) {
      EXPECT_EQ(a.images.to_vector(), resumed.next().images.to_vector());
    }
    differs += a.images.to_vector() != unaugmented.next().images.to_vector();
  }
  EXPECT_GT(differs, 10);  // it does augment
}

}  // namespace
}  // namespace dlh
