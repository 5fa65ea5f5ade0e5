// DLH — thin row-major wrappers around OpenBLAS's cblas_sgemm, private to the layers.
// OpenBLAS runs single-threaded inside the engine's threads (launcher/nn/thread_pool.hpp):
// ParallelSgemm cuts one product into column or row blocks, Sgemm is for a block that
// already runs on one of those threads.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstddef>

#include "launcher/nn/thread_pool.hpp"

namespace dlh {

// C (m x n, leading dimension ldc) = alpha * op(A) * op(B) + beta * C, row-major: op(A) is
// m x k (A is k x m when trans_a), op(B) is k x n (B is n x k when trans_b).
inline void SgemmLd(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;  // an empty local batch: nothing to write
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, std::max(1, lda), b,
              std::max(1, ldb), beta, c, std::max(1, ldc));
}

// The same with densely packed operands.
inline void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  const float* b, float beta, float* c) {
  SgemmLd(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

// Sgemm over the engine's threads. The longer of C's two dimensions is cut into blocks
// (whole multiples of 16) chosen from the shape alone, never from the thread count:
// OpenBLAS's result for an element can depend on the block it is computed in (its
// small-matrix kernels sum differently), so only a shape-fixed split keeps every result
// independent of the thread count. Each block is a product with the full k.
//
// The count is 1, 2, 4 or 8: every block packs the shared operand again and runs a narrower
// product, which costs a single thread 5% (4 blocks) to 10% (8 blocks) against one whole
// product, so two blocks from 8 MFLOP on and more only from 256 MFLOP per extra doubling.
// A power of two divides evenly over 2, 4 or 8 threads: 3 blocks on 2 threads left one
// thread idle for a third of the product (a 3136 x 1024 dense layer at batch 64 ran 36%
// slower than with 2 blocks).
inline int SgemmBlocks(double flops, int len) {
  if (flops < 8e6) return 1;
  int blocks = 2;
  while (blocks < 8 && flops >= 128e6 * 2 * blocks) blocks *= 2;
  while (blocks > 1 && len / blocks < 32) blocks /= 2;
  return blocks;
}

inline void ParallelSgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                          const float* a, const float* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  const int lda = trans_a ? m : k, ldb = trans_b ? k : n;
  const bool split_n = n >= m;
  const int len = split_n ? n : m;
  int blocks = SgemmBlocks(2.0 * m * n * k, len);
  if (blocks <= 1) {
    SgemmLd(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
    return;
  }
  // Rounded up, so that the blocks never outnumber the count chosen (65 in 2 blocks: 48 + 17).
  const int width = ((len + blocks - 1) / blocks + 15) / 16 * 16;
  blocks = (len + width - 1) / width;
  ParallelFor(blocks, [&](int blk, int) {
    const int lo = blk * width, cnt = std::min(len, lo + width) - lo;
    if (split_n) {  // columns lo.. of C and of op(B)
      const float* bb = trans_b ? b + size_t(lo) * k : b + lo;
      SgemmLd(trans_a, trans_b, m, cnt, k, alpha, a, lda, bb, ldb, beta, c + lo, n);
    } else {  // rows lo.. of C and of op(A)
      const float* aa = trans_a ? a + lo : a + size_t(lo) * k;
      SgemmLd(trans_a, trans_b, cnt, n, k, alpha, aa, lda, b, ldb, beta, c + size_t(lo) * n, n);
    }
  });
}

}  // namespace dlh
