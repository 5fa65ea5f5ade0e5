// DLH — a convolution's column copies alone (launcher/nn/layers/columns.hpp), which
// `dlh-estimate profile` times: they must be the engine's real im2col and col2im, over every
// tile. Folding the columns back (col2im of im2col) gives each input cell times the number of
// kernel taps that read it, which the test counts tap by tap.
#include "launcher/nn/layers/columns.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/error.hpp"
#include "common/spec.hpp"

namespace dlh {
namespace {

void ExpectFoldedColumnsCountTheTaps(const Shape3& in, int kernel, int stride, int padding) {
  LayerSpec spec;
  spec.kind = LayerKind::Conv2d;
  spec.filters = 4;
  spec.kernel = kernel;
  spec.stride = stride;
  spec.padding = padding;
  const auto conv = MakeLayer(spec, in);
  const Shape3 out = conv->output_shape();
  // Small integers: every sum below is exact in float.
  std::mt19937_64 rng(3);
  std::vector<float> sample(in.elements());
  for (float& v : sample) v = float(int(rng() % 17) - 8);
  std::vector<float> scratch, grad;
  RunColumnCopies(*conv, sample.data(), true, true, scratch, grad);
  ASSERT_EQ(grad.size(), in.elements());

  std::vector<int> taps(size_t(in.height) * in.width, 0);
  for (int oh = 0; oh < out.height; ++oh)
    for (int ow = 0; ow < out.width; ++ow)
      for (int kh = 0; kh < kernel; ++kh)
        for (int kw = 0; kw < kernel; ++kw) {
          const int ih = oh * stride - padding + kh, iw = ow * stride - padding + kw;
          if (ih >= 0 && ih < in.height && iw >= 0 && iw < in.width) ++taps[ih * in.width + iw];
        }
  for (int c = 0; c < in.channels; ++c)
    for (size_t q = 0; q < taps.size(); ++q) {
      const size_t at = size_t(c) * taps.size() + q;
      ASSERT_EQ(grad[at], sample[at] * float(taps[q])) << "channel " << c << ", cell " << q;
    }

  // Run again: the input gradient starts from zero each time, as in the engine's backward.
  RunColumnCopies(*conv, sample.data(), true, true, scratch, grad);
  EXPECT_EQ(grad[0], sample[0] * float(taps[0]));
}

TEST(ColumnCopies, SameConvolutionOverSeveralTiles) {
  // 64 channels, 5x5, on 8 rows of 28: each row's columns take 179 KB, so every output row
  // is a tile of its own (launcher/nn/layers/conv_tiles.hpp): the shifted-plane path.
  ExpectFoldedColumnsCountTheTaps({64, 8, 28}, 5, 1, 2);
}

TEST(ColumnCopies, StridedConvolution) { ExpectFoldedColumnsCountTheTaps({3, 9, 11}, 3, 2, 1); }

TEST(ColumnCopies, OnlyAConvolutionHasThem) {
  LayerSpec dense;
  dense.kind = LayerKind::Dense;
  dense.units = 3;
  const auto layer = MakeLayer(dense, {1, 4, 4});
  std::vector<float> sample(16), scratch, grad;
  EXPECT_THROW(RunColumnCopies(*layer, sample.data(), true, true, scratch, grad), Error);
}

}  // namespace
}  // namespace dlh
