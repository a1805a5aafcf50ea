#pragma once
// Block-sparse-row products on the host: the coupling and dense-leaf phases of HGEMV.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/bsr_shape.hpp>
#include <h2expr/detail/primitives/host/blas.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>
#include <h2expr/detail/core/error.hpp>

#include <cstdint>

namespace h2expr::detail {

// For every block row t < rows:
//   Y(t mb : t mb + mb, :) = beta Y(...) + sum_{e in [ptr[t], ptr[t+1])} op(B_b) X(idx[e] nb : idx[e] nb + nb, :)
// with b = blk ? blk[e] : e and B_b at blocks + b * block_stride: mb x nb (ld mb) for op::none, or
// nb x mb (ld nb) used transposed for op::transpose. X and Y hold nv columns. A non-uniform shape
// gives every node its own size and offset instead (bsr_shape.hpp).
template <class T>
void bsr_gemm(context<host>&, op block_op, int rows, const int* ptr, const int* idx, const int* blk, const T* blocks,
              int mb, int nb, std::int64_t block_stride, const T* X, std::int64_t ldx, T* Y, std::int64_t ldy, int nv,
              T beta, bsr_shape shape = {}) {
  if (mb == 0 || nv == 0) return;
  require(ldx <= INT32_MAX && ldy <= INT32_MAX, "block-sparse product: leading dimensions past 32 bits");
  const bool uniform = shape.uniform();
  auto k_out = [&](int u) { return uniform ? std::int64_t(mb) : shape.k_out[u]; };
  auto k_in = [&](int v) { return uniform ? std::int64_t(nb) : shape.k_in[v]; };
  auto x_at = [&](int v) { return uniform ? std::int64_t(v) * nb : shape.at_in[v]; };
  auto block_at = [&](int b) { return uniform ? std::int64_t(b) * block_stride : shape.at_block[b]; };
  const blas_one_thread one_thread(rows);  // each row's product whole, on its thread
#pragma omp parallel
  {
    dense<T> gathered;
#pragma omp for schedule(dynamic, 4)
    for (int t = 0; t < rows; ++t) {
      const std::int64_t m = k_out(t);
      auto y = map_block(Y + (uniform ? std::int64_t(t) * mb : shape.at_out[t]), m, std::int64_t(nv), ldy);
      if (beta == T(0)) y.setZero();
      else if (beta != T(1)) y *= beta;
      const int first = ptr[t], entries = ptr[t + 1] - first;
      if (entries == 0 || m == 0) continue;
      // Blocks stored one after the other in row order (m x k_in(v) each, ld m) form one wide matrix:
      // gathering the x blocks makes the row one gemm, which runs far better than many small ones.
      bool contiguous = block_op == op::none && blk == nullptr;
      std::int64_t width = 0;
      for (int e = first; e < first + entries && contiguous; ++e) {
        contiguous = block_at(e) == block_at(first) + m * width;
        width += k_in(idx[e]);
      }
      if (contiguous) {
        gathered.resize(width, nv);
        for (std::int64_t e = first, row = 0; e < first + entries; row += k_in(idx[e]), ++e)
          gathered.middleRows(row, k_in(idx[e])) = map_block(X + x_at(idx[e]), k_in(idx[e]), std::int64_t(nv), ldx);
        gemm_item(op::none, op::none, int(m), nv, int(width), T(1), blocks + block_at(first), int(m), gathered.data(),
                  int(width), T(1), y.data(), int(ldy));
        continue;
      }
      for (int e = first; e < first + entries; ++e) {
        const std::int64_t n = k_in(idx[e]);
        const T* b = blocks + block_at(blk ? blk[e] : e);
        auto x = map_block(X + x_at(idx[e]), n, std::int64_t(nv), ldx);
        if (block_op == op::none)
          gemm_item(op::none, op::none, int(m), nv, int(n), T(1), b, int(m), x.data(), int(ldx), T(1), y.data(), int(ldy));
        else
          gemm_item(op::transpose, op::none, int(m), nv, int(n), T(1), b, int(n), x.data(), int(ldx), T(1), y.data(),
                    int(ldy));
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
