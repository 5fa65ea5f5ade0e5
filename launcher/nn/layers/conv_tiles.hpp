// DLH — how a convolution cuts one sample's output into row tiles (conv2d.cpp), shared with
// `dlh-estimate profile`, which times OpenBLAS on the very products the engine runs.
//
// The columns of a whole sample (C*K*K x Ho*Wo floats) outgrow a core's L2 cache on wide
// layers: 32 channels, 3x3, on 28x28 make 903 KB, which im2col writes and the GEMM then
// reads back from L3. A tile of output rows keeps its columns, and the GEMM's packed
// operands, in L2.
#pragma once

#include <algorithm>
#include <cstddef>

namespace dlh {

constexpr size_t kConvTileBytes = 256 * 1024;  // the columns of one tile, at most

// Output rows per tile: as many as keep the tile's columns within kConvTileBytes, at least
// one, at most the whole plane. A function of the shape alone, so that every sample, thread
// count and run cuts the same way (the weight gradient's sums depend on the cut).
inline int ConvTileRows(int ckk, int out_height, int out_width) {
  const size_t row_bytes = size_t(std::max(1, ckk)) * size_t(std::max(1, out_width)) * 4;
  return int(std::clamp<size_t>(kConvTileBytes / row_bytes, 1, size_t(std::max(1, out_height))));
}

}  // namespace dlh
