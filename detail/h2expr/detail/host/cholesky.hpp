#pragma once
// Batched Cholesky (lower, in place) on the host. float data is factored in double, as ARA needs
// for its Cholesky QR (the Gram matrix squares the condition number).
#include <h2expr/detail/host/context.hpp>
#include <h2expr/detail/host/eigen_map.hpp>

#include <cmath>
#include <type_traits>

namespace h2expr::detail {

// A = L L^T with L in the lower triangle of A (the strict upper triangle is not referenced).
// Returns 0, or j + 1 when the pivot of column j is not positive or not finite (then A is partly
// overwritten).
template <class T>
int potrf_item(int n, T* A, int lda) {
  if (n == 0) return 0;
  auto a = map_block(A, n, n, lda);
  Eigen::Index failed;
  if constexpr (std::is_same_v<T, double>) {
    failed = Eigen::internal::llt_inplace<double, Eigen::Lower>::blocked(a);
  } else {
    dense<double> w = a.template cast<double>();
    failed = Eigen::internal::llt_inplace<double, Eigen::Lower>::blocked(w);
    a.template triangularView<Eigen::Lower>() = w.template cast<T>();
  }
  if (failed >= 0) return int(failed) + 1;
  for (int j = 0; j < n; ++j)  // Eigen tests pivots with x <= 0, which NaN passes: catch it here
    if (!std::isfinite(a(j, j))) return j + 1;
  return 0;
}

template <class T>
void potrf_vbatched(context<host>&, const int* n, T* const* A, const int* lda, int* info, int count, int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) info[i] = potrf_item(n[i], A[i], lda[i]);
}

template <class T>
void potrf_batched(context<host>&, int n, T* const* A, int lda, int* info, int count) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < count; ++i) info[i] = potrf_item(n, A[i], lda);
}

}  // namespace h2expr::detail
