#pragma once
// Batched QR on the host: thin Householder QR (LAPACK's where the build has OpenBLAS, 2-4x Eigen's
// at the sizes of H2 bases without -march), and column-pivoted (rank-revealing) QR, per item.
#include <h2expr/detail/primitives/host/blas.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace h2expr::detail {

// One item of the two batched QRs below: R (p x n, may be null) and, with form_q, A's first p =
// min(m, n) columns := Q. LAPACK where lapack_qr allows it, else Eigen's QR in A's storage.
template <class T>
void qr_item(int m, int n, T* A, int lda, T* R, int ldr, bool form_q, [[maybe_unused]] std::vector<T>& tau,
             [[maybe_unused]] std::vector<T>& work) {
  const int p = std::min(m, n);
  auto a = map_block(A, m, n, lda);
#if defined(H2EXPR_HAS_OPENBLAS)
  if (lapack_qr<T>(m, n)) {
    if (p == 0) return;
    lapack_geqrf(m, n, A, lda, tau, work);
    if (R) map_block(R, p, n, ldr) = a.topRows(p).template triangularView<Eigen::Upper>();
    if (form_q) lapack_orgqr(m, n, A, lda, tau, work);
    return;
  }
#endif
  Eigen::HouseholderQR<Eigen::Ref<dense<T>, 0, Eigen::OuterStride<>>> qr(a);  // in place, in A's storage
  if (R) map_block(R, p, n, ldr) = qr.matrixQR().topRows(p).template triangularView<Eigen::Upper>();
  if (form_q) {
    dense<T> q = qr.householderQ() * dense<T>::Identity(m, p);  // formed before A is overwritten
    a.leftCols(p) = q;
  }
}

template <class T>
void qr_items_host(const int* m, const int* n, T* const* A, const int* lda, T* const* R, const int* ldr,
                   bool form_q, int count) {
  // Items of 128 Ki entries or more (the near fields of hara's one-sample-set construction) go one
  // after another, each on all threads through LAPACK: a team of Eigen QRs ran them at a third of that.
  bool large = false;
  for (int i = 0; i < count && !large; ++i) large = double(m[i]) * n[i] >= 131072;
  const blas_one_thread one_thread(large ? 1 : count);  // then LAPACK takes every item, on its thread
#pragma omp parallel if (!large)
  {
    std::vector<T> tau, work;  // per thread, reused across its items
#pragma omp for schedule(dynamic)
    for (int i = 0; i < count; ++i)
      qr_item(m[i], n[i], A[i], lda[i], R ? R[i] : nullptr, R ? ldr[i] : 0, form_q, tau, work);
  }
}

// A_i (m x n) := Q_i (m x p, p = min(m, n), orthonormal columns); R_i (p x n) upper trapezoidal with
// A = Q R. R may be null (only Q wanted). Columns p..n-1 of A are unspecified on exit.
template <class T>
void qr_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                 const int* ldr, int count, int /*max_m*/, int /*max_n*/) {
  qr_items_host(m, n, A, lda, R, ldr, true, count);
}

// R_i (p x n) only, for callers that need the triangle alone (compression's weights): Q is not formed,
// which halves the work. A_i's contents are unspecified on exit.
template <class T>
void qr_r_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                   const int* ldr, int count, int /*max_m*/, int /*max_n*/) {
  qr_items_host(m, n, A, lda, R, ldr, false, count);
}

// A_i P_i = Q_i R_i with |R_jj| non-increasing. A_i := Q_i (m x p); R_i (p x n);
// perm_i[j] = original index of the column in position j; rank_i = #{j : |R_jj| > rel_tol |R_00|}.
template <class T>
void cpqr_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                   const int* ldr, int* const* perm, int* rank, T rel_tol, int count, int /*max_m*/,
                   int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) {
    const int p = std::min(m[i], n[i]);
    auto a = map_block(A[i], m[i], n[i], lda[i]);
    Eigen::ColPivHouseholderQR<dense<T>> qr(a);
    const auto& qrm = qr.matrixQR();
    int r = 0;
    const T r00 = p > 0 ? std::abs(qrm(0, 0)) : T(0);
    for (int j = 0; j < p; ++j)
      if (r00 > T(0) && std::abs(qrm(j, j)) > rel_tol * r00) ++r;
    rank[i] = r;
    if (R) map_block(R[i], p, n[i], ldr[i]) = qrm.topRows(p).template triangularView<Eigen::Upper>();
    for (int j = 0; j < n[i]; ++j) perm[i][j] = int(qr.colsPermutation().indices()(j));
    dense<T> q = qr.householderQ() * dense<T>::Identity(m[i], p);
    a.leftCols(p) = q;
  }
}

}  // namespace h2expr::detail
