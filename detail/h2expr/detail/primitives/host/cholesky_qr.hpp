#pragma once
// The two batched halves of a mixed-precision Cholesky QR on the host, as ARA's block Gram-Schmidt
// uses them (A_i is a tall block of samples, n_i <= 64 columns):
//   gram_vbatched           G_i = A_i^T A_i, accumulated in double whatever T is
//   cholqr_factor_vbatched  G_i = R_i^T R_i in double; W_i = R_i^{-1} in T, so A_i W_i has orthonormal
//                           columns; d_i = diag(R_i), the norms of the Gram-Schmidt residuals, and
//                           (optional) c_i, the column norms of A_i (sqrt of G_i's diagonal).
// A column whose pivot is below drop^2 times its own Gram diagonal is numerically dependent on the
// columns before it. It is dropped rather than normalised into noise, which keeps Cholesky QR stable
// on rank-deficient samples (exact-rank and zero blocks). W is compacted: the kept columns come first,
// in order, then zero columns, so A W = [Q, 0] and d = [diag of the kept, 0].
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

namespace h2expr::detail {

template <class T>
void gram_item(int m, int n, const T* A, int lda, double* G, int ldg) {
  auto g = map_block(G, n, n, ldg);
  if (n == 0) return;
  if (m == 0) {
    g.setZero();
    return;
  }
  auto a = map_block(A, m, n, lda);
  if constexpr (std::is_same_v<T, double>) g.noalias() = a.transpose() * a;
  else {
    const dense<double> ad = a.template cast<double>();
    g.noalias() = ad.transpose() * ad;
  }
}

// Returns 0, or -1 when G holds a non-finite value (then W and d are not written).
template <class T>
int cholqr_factor_item(int n, const double* G, int ldg, T* W, int ldw, double* d, double* norms, double drop) {
  if (n == 0) return 0;
  auto g = map_block(G, n, n, ldg);
  if (!g.allFinite()) return -1;
  if (norms)
    for (int j = 0; j < n; ++j) norms[j] = std::sqrt(std::max(g(j, j), 0.0));
  dense<double> r = g.template triangularView<Eigen::Upper>();  // right-looking, in the upper triangle
  std::vector<bool> dropped(std::size_t(n), false);
  for (int j = 0; j < n; ++j) {
    const double pivot = r(j, j);
    if (!(pivot > drop * drop * g(j, j))) {  // dependent (or zero) column: no pivot, no update
      dropped[std::size_t(j)] = true;
      r.row(j).setZero();
      r(j, j) = 1;
      continue;
    }
    const double rjj = std::sqrt(pivot);
    r(j, j) = rjj;
    r.row(j).tail(n - j - 1) /= rjj;
    for (int c = j + 1; c < n; ++c) r.col(c).segment(j + 1, c - j) -= r(j, c) * r.row(j).segment(j + 1, c - j).transpose();
  }
  // The dropped rows of R are unit rows, so R^{-1} leaves the other columns' coefficients intact.
  dense<double> w = dense<double>::Identity(n, n);
  r.template triangularView<Eigen::Upper>().solveInPlace(w);
  auto out = map_block(W, n, n, ldw);
  int kept = 0;
  for (int j = 0; j < n; ++j) {
    if (dropped[std::size_t(j)]) continue;
    out.col(kept) = w.col(j).template cast<T>();
    d[kept++] = r(j, j);
  }
  for (int j = kept; j < n; ++j) out.col(j).setZero(), d[j] = 0;
  return 0;
}

// G_i (n_i x n_i, double) = A_i^T A_i for A_i m_i x n_i.
template <class T>
void gram_vbatched(context<host>&, const int* m, const int* n, const T* const* A, const int* lda, double* const* G,
                   const int* ldg, int count, int /*max_m*/, int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) gram_item(m[i], n[i], A[i], lda[i], G[i], ldg[i]);
}

// W_i (n_i x n_i, upper triangular, T), d_i and norms_i (n_i each, double; norms may be null) from
// G_i; info_i = 0 or -1 (non-finite).
template <class T>
void cholqr_factor_vbatched(context<host>&, const int* n, const double* const* G, const int* ldg, T* const* W,
                            const int* ldw, double* const* d, double* const* norms, double drop, int* info, int count,
                            int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i)
    info[i] = cholqr_factor_item(n[i], G[i], ldg[i], W[i], ldw[i], d[i], norms ? norms[i] : nullptr, drop);
}

}  // namespace h2expr::detail
