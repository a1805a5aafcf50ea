#pragma once
// Batched thin SVD of small blocks on the host: Eigen's divide and conquer, checked. Eigen 3.4's BDCSVD
// returned singular vectors off by 1e-2 (float, a 212 x 32 input) and a product U S V^T off by 5e-6
// relative (double, a 171 x 19 input), both found by the batched ARA tests and example; such a result
// fails the check below (reconstruction and orthogonality, O(mnp) like the SVD itself) and is redone
// by two-sided Jacobi, which is accurate to rounding but several times slower on larger items.
#include <h2expr/detail/host/context.hpp>
#include <h2expr/detail/host/eigen_map.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace h2expr::detail {

// Whether a computed SVD reproduces A and has orthonormal factors, to a generous multiple of rounding.
template <class A, class Svd>
bool svd_is_accurate(const A& a, const Svd& svd) {
  using T = typename A::Scalar;
  const auto& u = svd.matrixU();
  const auto& v = svd.matrixV();
  const Eigen::Index p = svd.singularValues().size();
  if (p == 0) return true;
  const double limit = 64.0 * double(std::numeric_limits<T>::epsilon()) * std::sqrt(double(std::max(a.rows(), a.cols())));
  const double norm = a.template cast<double>().norm();
  const dense<T> usv = u * svd.singularValues().asDiagonal() * v.transpose();
  const double fit = (usv.template cast<double>() - a.template cast<double>()).norm();
  const dense<T> id = dense<T>::Identity(p, p);
  const double ou = (u.transpose() * u - id).template cast<double>().norm();
  const double ov = (v.transpose() * v - id).template cast<double>().norm();
  return std::isfinite(fit) && fit <= limit * norm && ou <= limit * std::sqrt(double(p)) &&
         ov <= limit * std::sqrt(double(p));
}

// A_i = U_i diag(S_i) V_i^T, p = min(m, n): A_i := U_i (m x p); S_i (p values, descending);
// V_i (n x p). V may be null (only U and S wanted).
template <class T>
void svd_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                  T* const* V, const int* ldv, int count, int /*max_m*/, int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) {
    const int p = std::min(m[i], n[i]);
    auto a = map_block(A[i], m[i], n[i], lda[i]);
    auto store = [&](const auto& svd) {
      for (int j = 0; j < p; ++j) S[i][j] = svd.singularValues()(j);
      if (V) map_block(V[i], n[i], p, ldv[i]) = svd.matrixV();
      a.leftCols(p) = svd.matrixU();
    };
    Eigen::BDCSVD<dense<T>> fast(a, Eigen::ComputeThinU | Eigen::ComputeThinV);
    if (svd_is_accurate(a, fast)) store(fast);
    else store(Eigen::JacobiSVD<dense<T>>(a, Eigen::ComputeThinU | Eigen::ComputeThinV));
  }
}

}  // namespace h2expr::detail
