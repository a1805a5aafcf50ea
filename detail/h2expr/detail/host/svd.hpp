#pragma once
// Batched thin SVD of small blocks on the host: Eigen's two-sided Jacobi (accurate to rounding in
// every singular triple, as the GPU's one-sided Jacobi is). Not BDCSVD: Eigen 3.4's divide and conquer
// returned singular vectors off by 1e-2 (float, a 212 x 32 input) and a product U S V^T off by 5e-6
// relative (double, a 171 x 42 input with singular values 22 .. 1e-13), both found by the batched ARA
// tests and example.
#include <h2expr/detail/host/context.hpp>
#include <h2expr/detail/host/eigen_map.hpp>

#include <algorithm>

namespace h2expr::detail {

// A_i = U_i diag(S_i) V_i^T, p = min(m, n): A_i := U_i (m x p); S_i (p values, descending);
// V_i (n x p). V may be null (only U and S wanted).
template <class T>
void svd_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                  T* const* V, const int* ldv, int count, int /*max_m*/, int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) {
    const int p = std::min(m[i], n[i]);
    auto a = map_block(A[i], m[i], n[i], lda[i]);
    Eigen::JacobiSVD<dense<T>> svd(a, Eigen::ComputeThinU | Eigen::ComputeThinV);
    for (int j = 0; j < p; ++j) S[i][j] = svd.singularValues()(j);
    if (V) map_block(V[i], n[i], p, ldv[i]) = svd.matrixV();
    a.leftCols(p) = svd.matrixU();
  }
}

}  // namespace h2expr::detail
