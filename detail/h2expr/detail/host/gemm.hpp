#pragma once
// Batched gemm on the host: C_i = alpha op(A_i) op(B_i) + beta C_i, one product per item (blas.hpp),
// OpenMP over the batch.
#include <h2expr/detail/blas_types.hpp>
#include <h2expr/detail/host/blas.hpp>
#include <h2expr/detail/host/context.hpp>

#include <cstdint>

namespace h2expr::detail {

template <class T>
void gemm_batched(context<host>&, op ta, op tb, int m, int n, int k, T alpha, const T* const* A, int lda,
                  const T* const* B, int ldb, T beta, T* const* C, int ldc, int count) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) gemm_item(ta, tb, m, n, k, alpha, A[i], lda, B[i], ldb, beta, C[i], ldc);
}

template <class T>
void gemm_strided_batched(context<host>&, op ta, op tb, int m, int n, int k, T alpha, const T* A, int lda,
                          std::int64_t stride_a, const T* B, int ldb, std::int64_t stride_b, T beta, T* C, int ldc,
                          std::int64_t stride_c, int count) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i)
    gemm_item(ta, tb, m, n, k, alpha, A + i * stride_a, lda, B + i * stride_b, ldb, beta, C + i * stride_c, ldc);
}

template <class T>
void gemm_vbatched(context<host>&, op ta, op tb, const int* m, const int* n, const int* k, T alpha,
                   const T* const* A, const int* lda, const T* const* B, const int* ldb, T beta, T* const* C,
                   const int* ldc, int count, int /*max_m*/, int /*max_n*/, int /*max_k*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i)
    gemm_item(ta, tb, m[i], n[i], k[i], alpha, A[i], lda[i], B[i], ldb[i], beta, C[i], ldc[i]);
}

}  // namespace h2expr::detail
