#pragma once
// Block-sparse-row products on the host: the coupling and dense-leaf phases of HGEMV.
#include <h2expr/detail/blas_types.hpp>
#include <h2expr/detail/host/context.hpp>
#include <h2expr/detail/host/eigen_map.hpp>

#include <cstdint>

namespace h2expr::detail {

// For every block row t < rows:
//   Y(t mb : t mb + mb, :) = beta Y(...) + sum_{e in [ptr[t], ptr[t+1])} op(B_b) X(idx[e] nb : idx[e] nb + nb, :)
// with b = blk ? blk[e] : e and B_b at blocks + b * block_stride: mb x nb (ld mb) for op::none, or
// nb x mb (ld nb) used transposed for op::transpose. X and Y hold nv columns.
template <class T>
void bsr_gemm(context<host>&, op block_op, int rows, const int* ptr, const int* idx, const int* blk, const T* blocks,
              int mb, int nb, std::int64_t block_stride, const T* X, std::int64_t ldx, T* Y, std::int64_t ldy, int nv,
              T beta) {
  if (mb == 0 || nv == 0) return;
  // Blocks stored consecutively in row order (blk == null, block_stride == mb nb) form one wide
  // mb x (entries nb) matrix per row: gathering the x blocks makes the row one gemm, which Eigen runs
  // far better than many small products.
  const bool row_contiguous = block_op == op::none && blk == nullptr && block_stride == std::int64_t(mb) * nb;
#pragma omp parallel
  {
    dense<T> gathered;
#pragma omp for schedule(dynamic, 4)
    for (int t = 0; t < rows; ++t) {
      auto y = map_block(Y + std::int64_t(t) * mb, std::int64_t(mb), std::int64_t(nv), ldy);
      if (beta == T(0)) y.setZero();
      else if (beta != T(1)) y *= beta;
      const int entries = ptr[t + 1] - ptr[t];
      if (entries == 0) continue;
      if (row_contiguous) {
        gathered.resize(std::int64_t(entries) * nb, nv);
        for (int e = 0; e < entries; ++e)
          gathered.middleRows(std::int64_t(e) * nb, nb) =
              map_block(X + std::int64_t(idx[ptr[t] + e]) * nb, std::int64_t(nb), std::int64_t(nv), ldx);
        y.noalias() += map_block(blocks + std::int64_t(ptr[t]) * block_stride, std::int64_t(mb),
                                 std::int64_t(entries) * nb, std::int64_t(mb)) * gathered;
        continue;
      }
      for (int e = ptr[t]; e < ptr[t + 1]; ++e) {
        const T* b = blocks + std::int64_t(blk ? blk[e] : e) * block_stride;
        auto x = map_block(X + std::int64_t(idx[e]) * nb, std::int64_t(nb), std::int64_t(nv), ldx);
        if (block_op == op::none) y.noalias() += map_block(b, mb, nb, mb) * x;
        else y.noalias() += map_block(b, nb, mb, nb).transpose() * x;
      }
    }
  }
}

// Xp(r, :) = X(src[r], :), or 0 where src[r] < 0 (padding): user order into padded tree order.
template <class T>
void gather_rows(context<host>&, const int* src, std::int64_t rows, const T* X, std::int64_t ldx, T* Xp,
                 std::int64_t ldp, int nv) {
#pragma omp parallel for schedule(static)
  for (int v = 0; v < nv; ++v)
    for (std::int64_t r = 0; r < rows; ++r) Xp[r + v * ldp] = src[r] >= 0 ? X[src[r] + v * ldx] : T(0);
}

// Y(dst[r], :) = alpha Yp(r, :) + beta Y(dst[r], :) where dst[r] >= 0: padded tree order back to user
// order, accumulating into Y when an expression sums products (beta == 0 does not read Y).
template <class T>
void scatter_rows(context<host>&, const int* dst, std::int64_t rows, const T* Yp, std::int64_t ldp, T* Y,
                  std::int64_t ldy, int nv, T alpha = T(1), T beta = T(0)) {
#pragma omp parallel for schedule(static)
  for (int v = 0; v < nv; ++v)
    for (std::int64_t r = 0; r < rows; ++r)
      if (dst[r] >= 0) {
        T& y = Y[dst[r] + v * ldy];
        y = beta == T(0) ? alpha * Yp[r + v * ldp] : alpha * Yp[r + v * ldp] + beta * y;
      }
}

}  // namespace h2expr::detail
