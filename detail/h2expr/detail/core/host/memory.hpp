#pragma once
// Memory of the host space: aligned allocation and copies. Same names as the CUDA space's memory.cuh.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/index.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

namespace h2expr::detail {

inline constexpr std::size_t host_alignment = 64;  // a cache line; enough for any SIMD width

// Large blocks come from the context's cache (host/pool.hpp), small ones from the heap; n tells
// deallocate which.
// A request the host cannot meet raises device_out_of_memory (the host space's device is the host).
template <class T>
T* allocate(context<host>& c, std::size_t n) {
  if (n == 0) return nullptr;
  const std::size_t bytes = checked_bytes<T>(n);
  try {
    if (host_pool::serves(bytes)) return static_cast<T*>(c.pool().allocate(bytes));
    return static_cast<T*>(::operator new[](bytes, std::align_val_t(host_alignment)));
  } catch (const std::bad_alloc&) {
    throw device_out_of_memory("h2expr: host allocation of " + std::to_string(bytes) + " bytes failed");
  }
}
template <class T>
void deallocate(context<host>& c, T* p, std::size_t n) noexcept {
  if (!p) return;
  if (host_pool::serves(n * sizeof(T))) c.pool().deallocate(p);
  else ::operator delete[](static_cast<void*>(p), std::align_val_t(host_alignment));
}

template <class T>
void copy(context<host>&, const T* src, T* dst, std::size_t n) {
  if (n) std::memcpy(dst, src, n * sizeof(T));
}
// dst(0:rows, 0:cols) = src(0:rows, 0:cols), column-major with leading dimensions.
template <class T>
void copy_2d(context<host>&, std::size_t rows, std::size_t cols, const T* src, std::size_t lds, T* dst,
             std::size_t ldd) {
  for (std::size_t j = 0; j < cols; ++j) std::copy_n(src + j * lds, rows, dst + j * ldd);
}
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
// Transfers between the space and ordinary host memory (plain copies here).
template <class T>
void download_2d(context<host>& c, std::size_t rows, std::size_t cols, const T* src, std::size_t lds,
                 T* host_dst, std::size_t ldd) {
  copy_2d(c, rows, cols, src, lds, host_dst, ldd);
}
template <class T>
void upload_2d(context<host>& c, std::size_t rows, std::size_t cols, const T* host_src, std::size_t lds,
               T* dst, std::size_t ldd) {
  copy_2d(c, rows, cols, host_src, lds, dst, ldd);
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
template <class T>
void fill(context<host>&, T* data, std::size_t n, T value) {
  std::fill_n(data, n, value);
}

}  // namespace h2expr::detail
