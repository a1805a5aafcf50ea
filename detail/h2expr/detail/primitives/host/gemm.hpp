#pragma once
// Batched gemm on the host: C_i = alpha op(A_i) op(B_i) + beta C_i, one product per item (blas.hpp):
// OpenMP over the batch, with OpenBLAS on the calling thread meanwhile (blas_one_thread), but large
// items one at a time, each on the BLAS's own threads: HARA's Gram matrices of 3D near fields
// (1830 x 64 x 2772) ran at a third of the speed on one thread each.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/host/blas.hpp>
#include <h2expr/detail/core/host/context.hpp>

#include <cstdint>

namespace h2expr::detail {

// Whether an item of m n k multiply-adds runs alone, on OpenBLAS's threads (64M: smaller ones, 2D HARA's,
// ran faster side by side, each on one thread).
inline bool large_gemm_item(int m, int n, int k) { return double(m) * n * k >= double(1 << 26); }

template <class T>
void gemm_batched(context<host>&, op ta, op tb, int m, int n, int k, T alpha, const T* const* A, int lda,
                  const T* const* B, int ldb, T beta, T* const* C, int ldc, int count) {
  if (large_gemm_item(m, n, k)) {
    for (int i = 0; i < count; ++i) gemm_item(ta, tb, m, n, k, alpha, A[i], lda, B[i], ldb, beta, C[i], ldc);
    return;
  }
  const blas_one_thread one_thread(count);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) gemm_item(ta, tb, m, n, k, alpha, A[i], lda, B[i], ldb, beta, C[i], ldc);
}

template <class T>
void gemm_strided_batched(context<host>&, op ta, op tb, int m, int n, int k, T alpha, const T* A, int lda,
                          std::int64_t stride_a, const T* B, int ldb, std::int64_t stride_b, T beta, T* C, int ldc,
                          std::int64_t stride_c, int count) {
  const auto item = [&](int i) {
    gemm_item(ta, tb, m, n, k, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
  };
  if (large_gemm_item(m, n, k)) {
    for (int i = 0; i < count; ++i) item(i);
    return;
  }
  const blas_one_thread one_thread(count);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) item(i);
}

template <class T>
void gemm_vbatched(context<host>&, op ta, op tb, const int* m, const int* n, const int* k, T alpha,
                   const T* const* A, const int* lda, const T* const* B, const int* ldb, T beta, T* const* C,
                   const int* ldc, int count, int /*max_m*/, int /*max_n*/, int /*max_k*/) {
  const auto item = [&](int i) {
    gemm_item(ta, tb, m[i], n[i], k[i], alpha, A[i], lda[i], B[i], ldb[i], beta, C[i], ldc[i]);
  };
  int small = 0;
  for (int i = 0; i < count; ++i)
    if (large_gemm_item(m[i], n[i], k[i])) item(i);
    else ++small;
  const blas_one_thread one_thread(small);
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i)
    if (!large_gemm_item(m[i], n[i], k[i])) item(i);
}

}  // namespace h2expr::detail
