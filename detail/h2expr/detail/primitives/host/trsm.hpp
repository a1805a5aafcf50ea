#pragma once
// Batched triangular solves on the host: B := alpha op(A)^{-1} B (left) or alpha B op(A)^{-1} (right).
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/host/blas.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>

namespace h2expr::detail {

template <class T>
void trsm_small_item(side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* A, int lda, T* B, int ldb) {
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

// Blocked: triangles above 64 are solved 64 columns at a time, the rest of B updated by gemm_item
// (OpenBLAS's kernels where the build has them, one thread inside a parallel loop), so nearly all the
// work runs at product speed; the 64 x 64 diagonal solves stay with Eigen.
template <class T>
void trsm_item(side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* A, int lda, T* B, int ldb) {
  constexpr int nb = 64;
  const bool left = s == side::left;
  const int k = left ? m : n;
  if (k <= nb || m == 0 || n == 0 || alpha == T(0)) {
    trsm_small_item(s, ul, trans, dg, m, n, alpha, A, lda, B, ldb);
    return;
  }
  if (alpha != T(1)) map_block(B, m, n, ldb) *= alpha;
  // op(A)(i, j) is A(i, j), or A(j, i) when transposed; op(A) is lower exactly when (A lower, not
  // transposed) or (A upper, transposed). Left-lower and right-upper solve from the first block on.
  const auto opa = [&](int i, int j) { return trans == op::none ? A + i + std::int64_t(j) * lda : A + j + std::int64_t(i) * lda; };
  const bool lower = (ul == uplo::lower) == (trans == op::none), forward = left == lower;
  const int blocks = (k + nb - 1) / nb;
  for (int step = 0; step < blocks; ++step) {
    const int b0 = (forward ? step : blocks - 1 - step) * nb, w = std::min(nb, k - b0);
    const int r0 = forward ? b0 + w : 0, rest = forward ? k - b0 - w : b0;  // the blocks still to solve
    const T* diag_block = A + b0 + std::int64_t(b0) * lda;
    if (left) {  // X_b = op(A)_bb^{-1} B_b, then B_r -= op(A)_rb X_b
      trsm_small_item(s, ul, trans, dg, w, n, T(1), diag_block, lda, B + b0, ldb);
      if (rest > 0) gemm_item(trans, op::none, rest, n, w, T(-1), opa(r0, b0), lda, B + b0, ldb, T(1), B + r0, ldb);
    } else {  // X_b = B_b op(A)_bb^{-1}, then B_r -= X_b op(A)_br
      T* xb = B + std::int64_t(b0) * ldb;
      trsm_small_item(s, ul, trans, dg, m, w, T(1), diag_block, lda, xb, ldb);
      if (rest > 0)
        gemm_item(op::none, trans, m, rest, w, T(-1), xb, ldb, opa(b0, r0), lda, T(1), B + std::int64_t(r0) * ldb, ldb);
    }
  }
}

template <class T>
void trsm_batched(context<host>&, side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* const* A,
                  int lda, T* const* B, int ldb, int count) {
  const blas_one_thread one_thread(count);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) trsm_item(s, ul, trans, dg, m, n, alpha, A[i], lda, B[i], ldb);
}

template <class T>
void trsm_vbatched(context<host>&, side s, uplo ul, op trans, diag dg, const int* m, const int* n, T alpha,
                   const T* const* A, const int* lda, T* const* B, const int* ldb, int count, int /*max_m*/,
                   int /*max_n*/) {
  const blas_one_thread one_thread(count);
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) trsm_item(s, ul, trans, dg, m[i], n[i], alpha, A[i], lda[i], B[i], ldb[i]);
}

}  // namespace h2expr::detail
