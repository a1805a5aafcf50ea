#pragma once
// Batched triangular solves on the GPU: B := alpha op(A)^{-1} B (left) or alpha B op(A)^{-1} (right).
// Uniform batches go to cuBLAS; non-uniform batches use h2expr's own kernel for small triangles and
// cuBLAS item by item for large ones.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/core/cuda/memory.cuh>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/primitives/cuda/gemm.cuh>  // cublas_op
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace h2expr::detail::kernels {

// One item per grid.y, and a thread per right-hand side: per column of B (left) or per row of B
// (right), in chunks of blockDim.x over grid.x. Each thread substitutes on its own; the entries of A
// it reads are the same across the block (broadcast), and for the right side the B accesses of a
// warp are contiguous. For the left side a thread's column is strided across the warp, so it is
// copied to shared memory, transposed (row l of all the block's columns together), and back at the
// end. Items whose triangle is larger than max_k are cuBLAS's (below) and left alone here. No
// synchronization: every thread touches only its own right-hand side, so threads without one leave
// at once.
template <class T>
__global__ void __launch_bounds__(128) trsm_vbatched(side sd, uplo ul, op trans, diag dg, const int* m_,
                                                     const int* n_, T alpha, const T* const* A_, const int* lda_,
                                                     T* const* B_, const int* ldb_, int max_k, int first_item) {
  extern __shared__ unsigned char trsm_shared[];
  const int item = first_item + blockIdx.y;
  const int m = m_[item], n = n_[item];
  const int rhs = blockIdx.x * blockDim.x + threadIdx.x;
  if (rhs >= (sd == side::left ? n : m) || (sd == side::left ? m : n) > max_k) return;
  T* __restrict__ B = B_[item];
  const std::int64_t ldb = ldb_[item];
  if (alpha == T(0)) {  // A is not read
    if (sd == side::left)
      for (int i = 0; i < m; ++i) B[i + rhs * ldb] = T(0);
    else
      for (int j = 0; j < n; ++j) B[rhs + j * ldb] = T(0);
    return;
  }
  const T* __restrict__ A = A_[item];
  const std::int64_t lda = lda_[item];
  const bool tr = trans == op::transpose, unit = dg == diag::unit;
  // op(A) is lower exactly when (A lower, not transposed) or (A upper, transposed).
  const bool lower = (ul == uplo::lower) == !tr;
  auto opa = [&](int i, int l) { return tr ? A[l + i * lda] : A[i + l * lda]; };

  if (sd == side::left) {
    // op(A) x = alpha b for the column b = B[:, rhs], b[l] at x[l * xs].
    T* const b = B + rhs * ldb;
    T* const x = reinterpret_cast<T*>(trsm_shared) + threadIdx.x;
    const int xs = blockDim.x;
    for (int l = 0; l < m; ++l) x[l * xs] = b[l];
    for (int t = 0; t < m; ++t) {
      const int i = lower ? t : m - 1 - t;
      T s = alpha * x[i * xs];
      if (lower)
        for (int l = 0; l < i; ++l) s -= opa(i, l) * x[l * xs];
      else
        for (int l = i + 1; l < m; ++l) s -= opa(i, l) * x[l * xs];
      x[i * xs] = unit ? s : s / opa(i, i);
    }
    for (int l = 0; l < m; ++l) b[l] = x[l * xs];
  } else {
    // x op(A) = alpha b for the row b = B[rhs, :]; op(A) upper runs forward, lower backward.
    T* b = B + rhs;
    for (int t = 0; t < n; ++t) {
      const int j = lower ? n - 1 - t : t;
      T s = alpha * b[j * ldb];
      if (lower)
        for (int l = j + 1; l < n; ++l) s -= b[l * ldb] * opa(l, j);
      else
        for (int l = 0; l < j; ++l) s -= b[l * ldb] * opa(l, j);
      b[j * ldb] = unit ? s : s / opa(j, j);
    }
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

template <class T>
void trsm_batched(context<cuda>& c, side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* const* A,
                  int lda, T* const* B, int ldb, int count) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0 || m == 0 || n == 0) return;
  const cublasSideMode_t cs = s == side::left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT;
  const cublasFillMode_t cu = ul == uplo::lower ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  const cublasDiagType_t cd = dg == diag::unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
  if constexpr (std::is_same_v<T, double>)
    H2EXPR_CUBLAS(cublasDtrsmBatched(c.blas(), cs, cu, cublas_op(trans), cd, m, n, &alpha, A, lda, B, ldb, count));
  else
    H2EXPR_CUBLAS(cublasStrsmBatched(c.blas(), cs, cu, cublas_op(trans), cd, m, n, &alpha, A, lda, B, ldb, count));
}

// Sizes, pointers and leading dimensions are device arrays; max_m/max_n bound the items. Items with
// small triangles go to the kernel above, all in one launch: 32 columns per block staged in 48 KiB of
// shared memory (triangles up to 192 rows in double, 384 in float) on the left, a thread per row of B
// and triangles up to 256 columns on the right. Larger ones (HARA's near fields reach 2,500 rows in
// 3D) go to cuBLAS's blocked trsm one by one, each call using the whole device: in the kernel one
// thread would run k^2 / 2 dependent updates, with only the item's few right-hand sides in parallel.
template <class T>
void trsm_vbatched(context<cuda>& c, side s, uplo ul, op trans, diag dg, const int* m, const int* n, T alpha,
                   const T* const* A, const int* lda, T* const* B, const int* ldb, int count, int max_m,
                   int max_n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0 || max_m <= 0 || max_n <= 0) return;
  constexpr int threads_left = 32, threads_right = 128;
  const bool left = s == side::left;
  // With alpha = 0 nothing is solved (B := 0): the kernel takes every item.
  const int max_k = alpha == T(0) ? std::max(max_m, max_n)
                    : left        ? int(48 * 1024 / (threads_left * sizeof(T)))
                                  : 256;
  const int threads = left ? threads_left : threads_right;
  const int rhs = left ? max_n : max_m, blocks = (rhs + threads - 1) / threads;
  // (alpha = 0: the kernel reads nothing, so it stages nothing; past 48 KiB the launch would fail.)
  const std::size_t staging = left && alpha != T(0) ? std::size_t(std::min(max_m, max_k)) * threads * sizeof(T) : 0;
  for_item_chunks(count, [&](int first, int items) {
    kernels::trsm_vbatched<T><<<dim3(blocks, items), threads, staging, c.stream()>>>(s, ul, trans, dg, m, n, alpha, A,
                                                                                     lda, B, ldb, max_k, first);
    H2EXPR_CUDA_LAUNCHED();
  });
  if ((left ? max_m : max_n) <= max_k) return;

  // The large items' sizes and addresses, read on the host (a few numbers per item and one wait; the
  // solves dwarf it).
  const std::size_t cn = std::size_t(count);
  std::vector<int> ms(cn), ns(cn), las(cn), lbs(cn);
  std::vector<const T*> as(cn);
  std::vector<T*> bs(cn);
  copy_2d_async(c, cn, 1, m, cn, ms.data(), cn, cudaMemcpyDeviceToHost);
  copy_2d_async(c, cn, 1, n, cn, ns.data(), cn, cudaMemcpyDeviceToHost);
  copy_2d_async(c, cn, 1, lda, cn, las.data(), cn, cudaMemcpyDeviceToHost);
  copy_2d_async(c, cn, 1, ldb, cn, lbs.data(), cn, cudaMemcpyDeviceToHost);
  copy_2d_async(c, cn, 1, A, cn, as.data(), cn, cudaMemcpyDeviceToHost);
  copy_2d_async(c, cn, 1, B, cn, bs.data(), cn, cudaMemcpyDeviceToHost);
  c.synchronize();
  const cublasSideMode_t cs = left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT;
  const cublasFillMode_t cu = ul == uplo::lower ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
  const cublasDiagType_t cd = dg == diag::unit ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
  for (std::size_t i = 0; i < cn; ++i) {
    const int mi = ms[i], ni = ns[i];
    // max_m and max_n bound every item (the kernel's grid covers no more).
    require<invalid_argument>(mi <= max_m && ni <= max_n, "trsm_vbatched: an item of " + std::to_string(mi) + " x " +
                                                              std::to_string(ni) + " past max_m x max_n = " +
                                                              std::to_string(max_m) + " x " + std::to_string(max_n));
    if ((left ? mi : ni) <= max_k || mi == 0 || ni == 0) continue;
    if constexpr (std::is_same_v<T, double>)
      H2EXPR_CUBLAS(cublasDtrsm(c.blas(), cs, cu, cublas_op(trans), cd, mi, ni, &alpha, as[i], las[i], bs[i], lbs[i]));
    else
      H2EXPR_CUBLAS(cublasStrsm(c.blas(), cs, cu, cublas_op(trans), cd, mi, ni, &alpha, as[i], las[i], bs[i], lbs[i]));
  }
}

}  // namespace h2expr::detail
