// DLH — a thin row-major wrapper around OpenBLAS's cblas_sgemm, private to the layers.
// All matrix products of conv2d and dense go through here, so OpenBLAS's own threads
// parallelise the heavy work and the layers stay single-threaded code.
#pragma once

#include <cblas.h>

#include <algorithm>

namespace dlh {

// C (m x n) = alpha * op(A) * op(B) + beta * C, all row-major and densely packed:
// op(A) is m x k (A is k x m when trans_a), op(B) is k x n (B is n x k when trans_b).
inline void Sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  const float* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;  // an empty local batch: nothing to write
  // Leading dimensions must be >= 1 even for empty operands, or cblas reports an error.
  const int lda = std::max(1, trans_a ? m : k);
  const int ldb = std::max(1, trans_b ? k : n);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
}

}  // namespace dlh
