#pragma once
// Batched triangular solves on the host: B := alpha op(A)^{-1} B (left) or alpha B op(A)^{-1} (right).
#include <h2expr/detail/blas_types.hpp>
#include <h2expr/detail/host/context.hpp>
#include <h2expr/detail/host/eigen_map.hpp>

namespace h2expr::detail {

template <class T>
void trsm_item(side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* A, int lda, T* B, int ldb) {
  if (m == 0 || n == 0) return;
  auto b = map_block(B, m, n, ldb);
  if (alpha == T(0)) {
    b.setZero();
    return;
  }
  if (alpha != T(1)) b *= alpha;
  const int k = s == side::left ? m : n;
  auto a = map_block(A, k, k, lda);
  auto solve = [&](auto&& tri) {
    if (s == side::left) tri.solveInPlace(b);
    else tri.template solveInPlace<Eigen::OnTheRight>(b);
  };
  // op(A) is lower exactly when (A lower, not transposed) or (A upper, transposed).
  const bool lower = (ul == uplo::lower) == (trans == op::none);
  const bool unit = dg == diag::unit;
  if (trans == op::none) {
    if (lower) unit ? solve(a.template triangularView<Eigen::UnitLower>()) : solve(a.template triangularView<Eigen::Lower>());
    else unit ? solve(a.template triangularView<Eigen::UnitUpper>()) : solve(a.template triangularView<Eigen::Upper>());
  } else {
    auto at = a.transpose();
    if (lower) unit ? solve(at.template triangularView<Eigen::UnitLower>()) : solve(at.template triangularView<Eigen::Lower>());
    else unit ? solve(at.template triangularView<Eigen::UnitUpper>()) : solve(at.template triangularView<Eigen::Upper>());
  }
}

template <class T>
void trsm_batched(context<host>&, side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* const* A,
                  int lda, T* const* B, int ldb, int count) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) trsm_item(s, ul, trans, dg, m, n, alpha, A[i], lda, B[i], ldb);
}

template <class T>
void trsm_vbatched(context<host>&, side s, uplo ul, op trans, diag dg, const int* m, const int* n, T alpha,
                   const T* const* A, const int* lda, T* const* B, const int* ldb, int count, int /*max_m*/,
                   int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) trsm_item(s, ul, trans, dg, m[i], n[i], alpha, A[i], lda[i], B[i], ldb[i]);
}

}  // namespace h2expr::detail
