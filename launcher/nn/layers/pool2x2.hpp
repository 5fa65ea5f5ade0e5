// DLH — the 2x2, stride-2 max pool of one plane, shared by MaxPool2d and by a convolution
// that runs the pool itself (layers/fuse.hpp), so that both pick the same winners.
#pragma once

#include <cstdint>

namespace dlh {

// Pools the H x W plane `src` (row length W) into the Ho x Wo plane `dst`, Ho = H / 2 and
// Wo = W / 2 (an odd last row or column is outside every window), and writes each window's
// winner, as an index into `src`, to `arg`. The windows are visited in the order of
// MaxPool2d's general loop, so ties resolve the same way: the first of equal values wins.
// Written with selects instead of branches (on real data the winner is a coin toss, and a
// mispredicted branch per comparison costs more than the window), and with restrict
// pointers so that the stores cannot be taken to alias the inputs.
inline void Pool2x2(const float* __restrict src, float* __restrict dst, int32_t* __restrict arg,
                    int W, int Ho, int Wo) {
  for (int oh = 0; oh < Ho; ++oh) {
    const float* r0 = src + 2 * oh * W;
    const float* r1 = r0 + W;
    const int top = 2 * oh * W, bottom = top + W;
    float* d = dst + oh * Wo;
    int32_t* a = arg + oh * Wo;
    for (int ow = 0; ow < Wo; ++ow) {
      const int c = 2 * ow;
      float v = r0[c];
      int32_t best = top + c;
      bool take = r0[c + 1] > v;
      v = take ? r0[c + 1] : v;
      best = take ? top + c + 1 : best;
      take = r1[c] > v;
      v = take ? r1[c] : v;
      best = take ? bottom + c : best;
      take = r1[c + 1] > v;
      v = take ? r1[c + 1] : v;
      best = take ? bottom + c + 1 : best;
      d[ow] = v;
      a[ow] = best;
    }
  }
}

}  // namespace dlh
