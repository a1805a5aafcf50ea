#pragma once
// Batched gemm on the host: C_i = alpha op(A_i) op(B_i) + beta C_i, one Eigen product per item,
// OpenMP over the batch (Eigen stays single-threaded inside a parallel region).
#include <h2expr/detail/blas_types.hpp>
#include <h2expr/detail/host/context.hpp>
#include <h2expr/detail/host/eigen_map.hpp>

#include <cstdint>

namespace h2expr::detail {

template <class T>
void gemm_item(op ta, op tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb, T beta,
               T* C, int ldc) {
  if (m == 0 || n == 0) return;
  auto c = map_block(C, m, n, ldc);
  if (beta == T(0)) c.setZero();  // BLAS semantics: C is not read when beta == 0 (it may hold NaN)
  else if (beta != T(1)) c *= beta;
  if (k == 0 || alpha == T(0)) return;
  auto a = map_block(A, ta == op::none ? m : k, ta == op::none ? k : m, lda);
  auto b = map_block(B, tb == op::none ? k : n, tb == op::none ? n : k, ldb);
  if (ta == op::none && tb == op::none) c.noalias() += alpha * a * b;
  else if (ta == op::none) c.noalias() += alpha * a * b.transpose();
  else if (tb == op::none) c.noalias() += alpha * a.transpose() * b;
  else c.noalias() += alpha * a.transpose() * b.transpose();
}

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
