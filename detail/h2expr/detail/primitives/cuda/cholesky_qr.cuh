#pragma once
// The two batched halves of a mixed-precision Cholesky QR on the GPU; semantics as on the host
// (detail/primitives/host/cholesky_qr.hpp): gram_vbatched accumulates A_i^T A_i in double from T data (the
// paper's mixed-precision syrk), cholqr_factor_vbatched factors it in double, drops numerically
// dependent columns, and writes W_i = R_i^{-1} in T (kept columns first) and d_i = diag(R_i).
// Blocks have <= 64 columns.
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/core/cuda/memory.cuh>
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace h2expr::detail::kernels {

inline constexpr int cholqr_max_cols = 64;

// grid.x: chunks of rows, grid.y: items. 16 x 16 threads, each owning a 4 x 4 register tile of the
// (up to) 64 x 64 Gram matrix, strided by 16; 32-row slices of A are staged in shared memory as
// double. One chunk writes G directly; several write partial sums that gram_reduce adds in a fixed
// order (deterministic, unlike atomics), so tall items (HARA's upper levels) use many blocks.
template <class T>
__global__ void __launch_bounds__(256) gram_vbatched(const int* m_, const int* n_, const T* const* A_,
                                                     const int* lda_, double* const* G_, const int* ldg_,
                                                     double* partial, int chunks, int rows_per_chunk,
                                                     int max_n, int first_item) {
  __shared__ double slice[32][cholqr_max_cols + 1];
  const int item = first_item + blockIdx.y, chunk = blockIdx.x;
  const int n = n_[item];
  if (n == 0) return;
  const int m = m_[item];
  const T* __restrict__ A = A_[item];
  const std::int64_t lda = lda_[item];
  const int row_begin = chunk * rows_per_chunk, row_end = min(m, row_begin + rows_per_chunk);
  const int tid = threadIdx.x, ti = tid % 16, tj = tid / 16;
  double acc[4][4] = {};
  for (int r0 = row_begin; r0 < row_end; r0 += 32) {
    for (int idx = tid; idx < 32 * cholqr_max_cols; idx += 256) {
      const int r = idx % 32, c = idx / 32, gr = r0 + r;
      slice[r][c] = (c < n && gr < row_end) ? double(A[gr + c * lda]) : 0.0;
    }
    __syncthreads();
#pragma unroll 4
    for (int r = 0; r < 32; ++r) {
      double a[4], b[4];
#pragma unroll
      for (int x = 0; x < 4; ++x) a[x] = slice[r][ti + 16 * x], b[x] = slice[r][tj + 16 * x];
#pragma unroll
      for (int x = 0; x < 4; ++x)
#pragma unroll
        for (int y = 0; y < 4; ++y) acc[x][y] += a[x] * b[y];
    }
    __syncthreads();
  }
  double* out;
  std::int64_t ld;
  if (chunks == 1) out = G_[item], ld = ldg_[item];
  else out = partial + (std::int64_t(item) * chunks + chunk) * max_n * max_n, ld = max_n;
#pragma unroll
  for (int x = 0; x < 4; ++x)
#pragma unroll
    for (int y = 0; y < 4; ++y) {
      const int i = ti + 16 * x, j = tj + 16 * y;
      if (i < n && j < n) out[i + j * ld] = acc[x][y];
    }
}

template <class T>
__global__ void gram_reduce(const int* n_, double* const* G_, const int* ldg_, const double* partial, int chunks,
                            int max_n, int first_item) {
  const int item = first_item + blockIdx.x, n = n_[item];
  double* G = G_[item];
  const std::int64_t ldg = ldg_[item], stride = std::int64_t(max_n) * max_n;
  const double* p = partial + std::int64_t(item) * chunks * stride;
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
    const int i = e % n, j = e / n;
    double s = 0;
    for (int c = 0; c < chunks; ++c) s += p[c * stride + i + j * max_n];
    G[i + j * ldg] = s;
  }
}

// One item per block of 64 threads. Right-looking Cholesky of the upper triangle in shared memory
// (thread c owns column c of the trailing update), then thread c back-substitutes column c of R^{-1}.
template <class T>
__global__ void __launch_bounds__(cholqr_max_cols) cholqr_factor_vbatched(const int* n_, const double* const* G_,
                                                                         const int* ldg_, T* const* W_,
                                                                         const int* ldw_, double* const* d_,
                                                                         double* const* norms, double drop,
                                                                         int* info, int first_item) {
  __shared__ double r[cholqr_max_cols][cholqr_max_cols + 1];
  __shared__ double gram_diag[cholqr_max_cols];
  __shared__ bool dropped[cholqr_max_cols];
  __shared__ int bad;
  const int item = first_item + blockIdx.x, n = n_[item], tid = threadIdx.x;
  if (n == 0) {
    if (tid == 0) info[item] = 0;
    return;
  }
  const double* __restrict__ G = G_[item];
  const std::int64_t ldg = ldg_[item];
  if (tid == 0) bad = 0;
  __syncthreads();
  for (int idx = tid; idx < n * n; idx += blockDim.x) {
    const int i = idx % n, j = idx / n;
    double v = 0;
    if (i <= j) {
      v = G[i + j * ldg];
      if (!isfinite(v)) bad = 1;
    }
    r[i][j] = v;
  }
  __syncthreads();
  if (bad) {  // the same in every thread
    if (tid == 0) info[item] = -1;
    return;
  }
  for (int j = tid; j < n; j += blockDim.x) {
    gram_diag[j] = r[j][j];
    if (norms) norms[item][j] = sqrt(fmax(r[j][j], 0.0));
  }
  __syncthreads();

  for (int j = 0; j < n; ++j) {
    const double pivot = r[j][j];
    const bool drop_j = !(pivot > drop * drop * gram_diag[j]);  // dependent or zero: no pivot, no update
    __syncthreads();  // every thread has read the pivot before row j changes
    const double rjj = drop_j ? 1.0 : sqrt(pivot);
    for (int c = j + tid; c < n; c += blockDim.x) r[j][c] = c == j ? rjj : (drop_j ? 0.0 : r[j][c] / rjj);
    if (tid == 0) dropped[j] = drop_j;
    __syncthreads();
    if (!drop_j)
      for (int c = j + 1 + tid; c < n; c += blockDim.x) {
        const double rc = r[j][c];
        for (int i = j + 1; i <= c; ++i) r[i][c] -= r[j][i] * rc;
      }
    __syncthreads();
  }

  // Kept columns go first, in order (position = kept columns before them), then zero columns.
  int kept = 0;
  for (int j = 0; j < n; ++j) kept += !dropped[j];
  T* __restrict__ W = W_[item];
  const std::int64_t ldw = ldw_[item];
  for (int c = tid; c < n; c += blockDim.x) {
    if (c >= kept) {
      for (int i = 0; i < n; ++i) W[i + c * ldw] = T(0);
      d_[item][c] = 0;
    }
    if (dropped[c]) continue;
    int pos = 0;
    for (int j = 0; j < c; ++j) pos += !dropped[j];
    double x[cholqr_max_cols];  // column c of R^{-1}; dropped rows of R are unit rows
    for (int i = c; i >= 0; --i) {
      double s = i == c ? 1.0 : 0.0;
      for (int k = i + 1; k <= c; ++k) s -= r[i][k] * x[k];
      x[i] = s / r[i][i];
    }
    for (int i = 0; i < n; ++i) W[i + pos * ldw] = i <= c ? T(x[i]) : T(0);
    d_[item][pos] = r[c][c];
  }
  if (tid == 0) info[item] = 0;
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// G_i (n_i x n_i, double) = A_i^T A_i for A_i m_i x n_i, n_i <= 64.
template <class T>
void gram_vbatched(context<cuda>& c, const int* m, const int* n, const T* const* A, const int* lda, double* const* G,
                   const int* ldg, int count, int max_m, int max_n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  require(max_n <= kernels::cholqr_max_cols, "gram_vbatched: blocks have at most 64 columns");
  if (count <= 0 || max_n <= 0) return;
  // Rows are split in chunks of >= 1024 so that tall items fill the device, as far as the partial
  // sums (count * chunks * max_n^2 doubles) stay within 64 MiB.
  const std::size_t per_item = std::size_t(max_n) * std::size_t(max_n) * std::size_t(count);
  const std::size_t budget = (std::size_t(64) << 20) / sizeof(double);
  const int wanted = std::max(1, (max_m + 1023) / 1024);
  const int chunks_cap = int(std::max<std::size_t>(1, std::min<std::size_t>(budget / per_item, 1u << 20)));
  int chunks = std::min(wanted, chunks_cap);
  int rows_per_chunk = std::max(1, (max_m + chunks - 1) / chunks);
  rows_per_chunk = (rows_per_chunk + 31) / 32 * 32;
  chunks = std::max(1, (max_m + rows_per_chunk - 1) / rows_per_chunk);
  const device_scratch<double> partial(c, chunks > 1 ? per_item * std::size_t(chunks) : 0);
  for_item_chunks(count, [&](int first, int items) {
    kernels::gram_vbatched<T><<<dim3(chunks, items), 256, 0, c.stream()>>>(m, n, A, lda, G, ldg, partial.get(), chunks,
                                                                          rows_per_chunk, max_n, first);
    H2EXPR_CUDA_LAUNCHED();
  });
  if (chunks > 1) {
    kernels::gram_reduce<T><<<count, 256, 0, c.stream()>>>(n, G, ldg, partial.get(), chunks, max_n, 0);
    H2EXPR_CUDA_LAUNCHED();
  }
}

// W_i (n_i x n_i, upper triangular, T), d_i and norms_i (n_i each, double; norms may be null) from
// G_i; info_i = 0 or -1 (non-finite).
template <class T>
void cholqr_factor_vbatched(context<cuda>& c, const int* n, const double* const* G, const int* ldg, T* const* W,
                            const int* ldw, double* const* d, double* const* norms, double drop, int* info, int count,
                            int max_n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  require(max_n <= kernels::cholqr_max_cols, "cholqr_factor_vbatched: blocks have at most 64 columns");
  if (count <= 0) return;
  kernels::cholqr_factor_vbatched<T>
      <<<count, kernels::cholqr_max_cols, 0, c.stream()>>>(n, G, ldg, W, ldw, d, norms, drop, info, 0);
  H2EXPR_CUDA_LAUNCHED();
}

}  // namespace h2expr::detail
