#pragma once
// Batched Cholesky (lower, in place) on the host. float data is factored in double, as ARA needs
// for its Cholesky QR (the Gram matrix squares the condition number).
#include <h2expr/detail/primitives/host/blas.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>
#include <h2expr/detail/primitives/host/trsm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace h2expr::detail {

// Right-looking blocked Cholesky of the lower triangle of a (n x n, ld lda) in place: 64-column
// panels factored by Eigen, the rows below each solved, and the trailing lower triangle updated a
// column panel at a time through gemm_item (the BLAS's kernels; Eigen's own, at SSE2 without -march,
// ran hara's near-field Gram matrices of up to ~1,900 rows at a third of that). Returns the column
// whose pivot failed, or -1. (A template, always on double: as a plain inline function it instantiated
// Eigen's LLT, the triangular solve and the BLAS wrapper in every translation unit that includes the
// library: the largest CUDA test compile took 3.07 GB with it, 2.60 without.)
template <class D = double>
Eigen::Index llt_lower_blocked(D* a, int n, int lda) {
  static_assert(std::is_same_v<D, double>, "factored in double");
  constexpr int nb = 64;
  for (int j = 0; j < n; j += nb) {
    const int jb = std::min(nb, n - j), rest = n - j - jb;
    D* panel = a + j + std::int64_t(j) * lda;
    auto d = map_block(panel, jb, jb, lda);
    const Eigen::Index failed = Eigen::internal::llt_inplace<D, Eigen::Lower>::blocked(d);
    if (failed >= 0) return j + failed;
    if (rest == 0) break;
    D* below = panel + jb;  // rest x jb: := below L^{-T}
    trsm_small_item(side::right, uplo::lower, op::transpose, diag::non_unit, rest, jb, D(1), panel, lda, below, lda);
    for (int c = 0; c < rest; c += nb) {
      const int cb = std::min(nb, rest - c);
      gemm_item(op::none, op::transpose, rest - c, cb, jb, D(-1), below + c, lda, below + c, lda, D(1),
                panel + jb + c + std::int64_t(jb + c) * lda, lda);
    }
  }
  return -1;
}

// A = L L^T with L in the lower triangle of A (the strict upper triangle is not referenced).
// Returns 0, or j + 1 when the pivot of column j is not positive or not finite (then A is partly
// overwritten).
template <class T>
int potrf_item(int n, T* A, int lda) {
  if (n == 0) return 0;
  auto a = map_block(A, n, n, lda);
  Eigen::Index failed;
  if constexpr (std::is_same_v<T, double>) {
    failed = llt_lower_blocked<double>(A, n, lda);
  } else {
    dense<double> w = a.template cast<double>();
    failed = llt_lower_blocked<double>(w.data(), n, n);
    a.template triangularView<Eigen::Lower>() = w.template cast<T>();
  }
  // Eigen tests pivots with x <= 0, which NaN and +inf pass (an infinite pivot zeroes its column, and a
  // later pivot may fail in its place): the first non-finite entry of L's diagonal before the pivot
  // Eigen reported fails the item.
  const int factored = failed >= 0 ? int(failed) : n;
  for (int j = 0; j < factored; ++j)
    if (!std::isfinite(a(j, j))) return j + 1;
  return failed >= 0 ? int(failed) + 1 : 0;
}

template <class T>
void potrf_vbatched(context<host>&, const int* n, T* const* A, const int* lda, int* info, int count, int /*max_n*/) {
  const blas_one_thread one_thread(count);  // the trailing updates' products whole, on each item's thread
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) info[i] = potrf_item(n[i], A[i], lda[i]);
}

template <class T>
void potrf_batched(context<host>&, int n, T* const* A, int lda, int* info, int count) {
  const blas_one_thread one_thread(count);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) info[i] = potrf_item(n, A[i], lda);
}

}  // namespace h2expr::detail
