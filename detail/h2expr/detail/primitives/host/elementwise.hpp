#pragma once
// Element-wise and copy primitives of the host space on blocks and batches of blocks (allocation and
// plain copies: core/host/memory.hpp). Same names as the CUDA space's elementwise.cuh.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/host/context.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace h2expr::detail {

// dst[i](0:rows, 0:c_i) = src[i](0:rows, 0:c_i) for i < count, c_i = item_cols ? item_cols[i] : cols:
// many blocks in one call (pointer and column arrays in the space), e.g. marshaling the node blocks
// of one level into another layout.
template <class T>
void copy_batched(context<host>&, int rows, int cols, const T* const* src, int lds, T* const* dst, int ldd, int count,
                  const int* item_cols = nullptr) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < (item_cols ? item_cols[i] : cols); ++j)
      std::copy_n(src[i] + std::int64_t(j) * lds, rows, dst[i] + std::int64_t(j) * ldd);
}
// dst[i](0:rows[i], 0:cols[i]) = op(src[i]) for blocks of any shape and leading dimension (a compact
// per-node layout from or into a padded one; transposed coupling blocks stacked into weights).
template <class T>
void copy_vbatched(context<host>&, op trans, const int* rows, const int* cols, const T* const* src, const int* lds,
                   T* const* dst, const int* ldd, int count) {
#pragma omp parallel for schedule(dynamic, 16)
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < cols[i]; ++j) {
      T* d = dst[i] + std::int64_t(j) * ldd[i];
      if (trans == op::none) std::copy_n(src[i] + std::int64_t(j) * lds[i], rows[i], d);
      else
        for (int r = 0; r < rows[i]; ++r) d[r] = src[i][j + std::int64_t(r) * lds[i]];
    }
}
// y += alpha x over n contiguous entries (residuals of samples: operator minus approximation).
template <class T>
void axpy(context<host>&, std::size_t n, T alpha, const T* x, T* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < std::int64_t(n); ++i) y[i] += alpha * x[i];
}
// Y = alpha D X + beta Y over a rows x cols block with leading dimensions (beta == 0 does not read Y),
// D = diag(d), or the identity when d is null: the result of a product that cannot accumulate by
// itself added into an expression's output, and the diagonal operands of expressions.
template <class T>
void axpby_2d(context<host>&, std::size_t rows, std::size_t cols, T alpha, const T* x, std::size_t ldx, T beta, T* y,
              std::size_t ldy, const T* d = nullptr) {
#pragma omp parallel for schedule(static)
  for (std::int64_t j = 0; j < std::int64_t(cols); ++j)
    for (std::size_t i = 0; i < rows; ++i) {
      T& v = y[i + j * ldy];
      const T ax = d ? alpha * d[i] * x[i + j * ldx] : alpha * x[i + j * ldx];
      v = beta == T(0) ? ax : ax + beta * v;
    }
}
// A_t(j, j) += alpha d[t m + j] for the m x m blocks A_t = blocks + block[t] m m, t < count: a diagonal
// added to an H2 matrix's dense diagonal leaves (d in padded tree order).
template <class T>
void add_to_diagonals(context<host>&, int count, int m, T alpha, const T* d, const int* block, T* blocks) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < count; ++t)
    for (int j = 0; j < m; ++j) blocks[std::int64_t(block[t]) * m * m + std::int64_t(j) * (m + 1)] += alpha * d[std::int64_t(t) * m + j];
}
// Y = beta Y over a rows x cols block (beta == 0 writes zeros without reading Y, NaN included).
template <class T>
void scale_2d(context<host>&, std::int64_t rows, std::int64_t cols, T beta, T* Y, std::int64_t ldy) {
#pragma omp parallel for schedule(static)
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t i = 0; i < rows; ++i) Y[i + j * ldy] = beta == T(0) ? T(0) : beta * Y[i + j * ldy];
}
template <class T>
void fill(context<host>&, T* data, std::size_t n, T value) {
  std::fill_n(data, n, value);
}

}  // namespace h2expr::detail
