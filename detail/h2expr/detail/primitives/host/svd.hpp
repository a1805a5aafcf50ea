#pragma once
// Batched thin SVD of small blocks on the host: LAPACK's gesdd where the build has OpenBLAS (blas.hpp),
// else Eigen's divide and conquer, checked. Eigen 3.4's BDCSVD
// returned singular vectors off by 1e-2 (float, a 212 x 32 input) and a product U S V^T off by 5e-6
// relative (double, a 171 x 19 input), both found by the batched ARA tests and example; such a result
// fails the check below (reconstruction and orthogonality, O(mnp) like the SVD itself) and is redone
// by two-sided Jacobi, which is accurate to rounding but several times slower on larger items.
#include <h2expr/detail/primitives/host/blas.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <vector>

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

// Columns p'..p-1 completing the orthonormal columns X (rows x p') to p orthonormal columns.
template <class T>
dense<T> complete_orthonormal(const dense<T>& X, Eigen::Index p) {
  if (X.cols() == 0) return dense<T>::Identity(X.rows(), p);
  Eigen::HouseholderQR<dense<T>> qr(X);
  dense<T> Q = qr.householderQ() * dense<T>::Identity(X.rows(), p);
  Q.leftCols(X.cols()) = X;  // the first p' columns of Q span X's range: keep X itself
  return Q;
}

#if defined(H2EXPR_HAS_OPENBLAS)
// A thin SVD from LAPACK (lapack_svd) behind the accessors of Eigen's SVDs; `converged` false where
// neither of LAPACK's SVDs converged. Non-finite input (which LAPACK rejects) gives NaN factors.
template <class T>
struct lapack_factors {
  dense<T> u, v;
  Eigen::Matrix<T, Eigen::Dynamic, 1> s;
  bool converged = true;
  explicit lapack_factors(const dense<T>& a) {
    const int m = int(a.rows()), n = int(a.cols()), p = std::min(m, n);
    u.resize(m, p), s.resize(p);
    dense<T> vt(p, n);
    if (a.allFinite()) {
      converged = lapack_svd<T>(m, n, a.data(), m, u.data(), s.data(), vt.data());
    } else {
      u.setConstant(std::numeric_limits<T>::quiet_NaN());
      s.setConstant(std::numeric_limits<T>::quiet_NaN());
      vt.setConstant(std::numeric_limits<T>::quiet_NaN());
    }
    v = vt.transpose();
  }
  const dense<T>& matrixU() const { return u; }
  const dense<T>& matrixV() const { return v; }
  const Eigen::Matrix<T, Eigen::Dynamic, 1>& singularValues() const { return s; }
};
#endif

// The SVD of a: LAPACK's where the build has OpenBLAS; else Eigen's divide and conquer, checked, with
// two-sided Jacobi as the fallback. Exactly
// zero rows and columns (rank-deficient QR factors, zero-padded bases) are taken out first: Eigen
// 3.4's BDCSVD indexed out of bounds (a segfault in computeSVDofM) on a weights matrix of HARA's
// recompression that had them, and they only add exactly deflated zeros.
template <class T, class A>
void thin_svd(const A& a, dense<T>& U, Eigen::Matrix<T, Eigen::Dynamic, 1>& S, dense<T>& V) {
  const Eigen::Index m = a.rows(), n = a.cols(), p = std::min(m, n);
  std::vector<Eigen::Index> rows, cols;
  for (Eigen::Index i = 0; i < m; ++i)
    if ((a.row(i).array() != T(0)).any()) rows.push_back(i);
  for (Eigen::Index j = 0; j < n; ++j)
    if ((a.col(j).array() != T(0)).any()) cols.push_back(j);
  dense<T> b(rows.size(), cols.size());
  for (std::size_t j = 0; j < cols.size(); ++j)
    for (std::size_t i = 0; i < rows.size(); ++i) b(i, j) = a(rows[i], cols[j]);
  auto solve = [&](const auto& svd) {
    const Eigen::Index q = svd.singularValues().size();
    S.setZero(p);
    S.head(q) = svd.singularValues();
    dense<T> u = dense<T>::Zero(m, q), v = dense<T>::Zero(n, q);
    for (std::size_t i = 0; i < rows.size(); ++i) u.row(rows[i]) = svd.matrixU().row(i);
    for (std::size_t j = 0; j < cols.size(); ++j) v.row(cols[j]) = svd.matrixV().row(j);
    U = q < p ? complete_orthonormal(u, p) : u;
    V = q < p ? complete_orthonormal(v, p) : v;
  };
  if (b.size() == 0) {
    dense<T> none(m, 0), none_v(n, 0);
    S.setZero(p);
    U = complete_orthonormal(none, p), V = complete_orthonormal(none_v, p);
    return;
  }
#if defined(H2EXPR_HAS_OPENBLAS)
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    // LAPACK's SVD (blas.hpp), accurate to rounding: neither Eigen SVD is compiled or run.
    const lapack_factors<T> f(b);
    require<numerical_failure>(f.converged, "SVD: neither LAPACK's gesdd nor its gesvd converged");
    solve(f);
  } else
#endif
  {
    Eigen::BDCSVD<dense<T>> fast(b, Eigen::ComputeThinU | Eigen::ComputeThinV);
    if (svd_is_accurate(b, fast)) solve(fast);
    else solve(Eigen::JacobiSVD<dense<T>>(b, Eigen::ComputeThinU | Eigen::ComputeThinV));
  }
}

// item(i) for i < count on OpenMP threads (BLAS on one thread each; a dynamic schedule, as the items
// differ in size). The first exception of an item is rethrown after the loop: one that leaves an
// OpenMP region terminates the program.
template <class F>
void for_each_item(int count, F&& item) {
  const blas_one_thread one_thread(count);
  std::mutex mutex;
  std::exception_ptr first;
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i) {
    try {
      item(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// A_i = U_i diag(S_i) V_i^T, p = min(m, n): A_i := U_i (m x p); S_i (p values, descending);
// V_i (n x p). V may be null (only U and S wanted).
template <class T>
void svd_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                  T* const* V, const int* ldv, int count, int /*max_m*/, int /*max_n*/) {
  for_each_item(count, [&](int i) {
    const int p = std::min(m[i], n[i]);
    auto a = map_block(A[i], m[i], n[i], lda[i]);
    dense<T> u, v;
    Eigen::Matrix<T, Eigen::Dynamic, 1> s;
    thin_svd<T>(a, u, s, v);
    for (int j = 0; j < p; ++j) S[i][j] = s(j);
    if (V) map_block(V[i], n[i], p, ldv[i]) = v;
    a.leftCols(p) = u;
  });
}

// Right singular pairs of a (m >= n, in double) from the eigenvectors of its Gram matrix a^T a: every
// value whose square stands well above the Gram's rounding (about n u ||a||^2) comes out exact. While
// `resolve` lies below that, the remaining directions W_s are resolved the same way from a W_s, on
// their own scale (each round reaches about 5 decades further), down to `floor` (a's own rounding).
// The dropped part's norm is exact either way: the kept directions are always those of the upper
// rounds, and a W_s is formed exactly enough. What the rounds' seams cost is optimality, not the
// bound: a value next to a seam is off by up to ~5e-4 of itself, and the lower round's values may
// carry ~1e-10 of the largest from directions just above the seam, so a rank can come out one higher.
// (A template, always on double: as a plain inline function it instantiated Eigen's eigensolver and
// both SVDs in every translation unit that includes the library, ~28 s of compile each.)
template <class D = double>
void gram_right_singular(const dense<D>& a, double resolve, double floor, Eigen::VectorXd& s, dense<D>& v) {
  static_assert(std::is_same_v<D, double>, "the Gram matrix is formed in double");
  const Eigen::Index n = a.cols();
  dense<double> G = dense<double>::Zero(n, n);
  G.selfadjointView<Eigen::Lower>().rankUpdate(a.transpose());
  Eigen::SelfAdjointEigenSolver<dense<double>> eig(G);  // ascending
  if (eig.info() != Eigen::Success) {  // not converged (never seen): the checked SVD instead
    dense<double> u;
    thin_svd<D>(a, u, s, v);
    return;
  }
  const Eigen::VectorXd lambda = eig.eigenvalues().reverse().cwiseMax(0.0);
  v = eig.eigenvectors().rowwise().reverse();
  s = lambda.cwiseSqrt();
  const double noise = 1e3 * double(n) * std::numeric_limits<double>::epsilon() * (n > 0 ? lambda(0) : 0.0);
  Eigen::Index large = 0;
  while (large < n && lambda(large) > noise) ++large;
  if (large == 0 || large == n || resolve * resolve >= noise || noise <= floor * floor) return;
  const Eigen::Index rest = n - large;
  Eigen::VectorXd ss;
  dense<double> vs;
  gram_right_singular<D>(a * v.rightCols(rest), resolve, floor, ss, vs);
  const dense<double> w = v.rightCols(rest) * vs;
  v.rightCols(rest) = w;
  s.tail(rest) = ss;
  // sqrt(noise) separates the rounds, so the order only needs fixing at that seam
  std::vector<Eigen::Index> order(n);
  std::iota(order.begin(), order.end(), Eigen::Index(0));
  std::stable_sort(order.begin(), order.end(), [&](Eigen::Index i, Eigen::Index j) { return s(i) > s(j); });
  const Eigen::VectorXd s0 = s;
  const dense<double> v0 = v;
  for (Eigen::Index j = 0; j < n; ++j) s(j) = s0(order[j]), v.col(j) = v0.col(order[j]);
}

// The right singular pairs of a (m >= n, in double) on the subspace that matters above `resolve`: a
// pivoted Cholesky factorization of a^T a (left-looking: the rows it pivots on, never the whole Gram
// matrix) stops once the directions left carry at most 1e-3 resolve^2 in all (their trace), and
// Rayleigh-Ritz on the span of its r rows gives r pairs: every value above resolve to 5e-4 of itself,
// the discarded part's norm to 5e-4 of resolve, r of them instead of n (truncation to 1e-4 keeps 8-30 of
// 64). The other n - r values and vectors come back as zeros. False, with nothing written, where
// rounding in a^T a (n u trace) could reach that stopping point, or where nothing would be saved.
template <class D = double>
bool reduced_right_singular(const dense<D>& a, double resolve, Eigen::VectorXd& s, dense<D>& v) {
  static_assert(std::is_same_v<D, double>, "the Gram matrix is formed in double");
  const Eigen::Index n = a.cols();
  Eigen::VectorXd d = a.colwise().squaredNorm().transpose();  // the diagonal of what is left of a^T a
  const double stop = 1e-3 * resolve * resolve;
  if (!(stop >= 10.0 * double(n) * std::numeric_limits<double>::epsilon() * d.sum())) return false;
  dense<double> rows(n, n);  // row j of the factor, as column j
  std::vector<bool> pivoted(std::size_t(n), false);
  Eigen::Index r = 0;
  for (; r < n; ++r) {
    double rest = 0;
    Eigen::Index p = -1;
    for (Eigen::Index i = 0; i < n; ++i)
      if (!pivoted[std::size_t(i)]) {
        rest += std::max(d(i), 0.0);
        if (p < 0 || d(i) > d(p)) p = i;
      }
    if (rest <= stop) break;
    Eigen::VectorXd g = a.transpose() * a.col(p);  // column p of a^T a, less what the factor holds
    g.noalias() -= rows.leftCols(r) * rows.leftCols(r).row(p).transpose();
    if (!(g(p) > 0)) break;  // rounding only is left
    rows.col(r) = g / std::sqrt(g(p));
    d -= rows.col(r).cwiseAbs2();
    pivoted[std::size_t(p)] = true;
  }
  if (r >= n / 2) return false;  // the eigensolver on n is about as fast
  s = Eigen::VectorXd::Zero(n);
  v = dense<double>::Zero(n, n);
  if (r == 0) return true;
  Eigen::HouseholderQR<dense<double>> qr(rows.leftCols(r));
  const dense<double> q = qr.householderQ() * dense<double>::Identity(n, r);
  const dense<double> b = a * q;
  Eigen::SelfAdjointEigenSolver<dense<double>> eig(b.transpose() * b);  // ascending
  if (eig.info() != Eigen::Success) return false;
  s.head(r) = eig.eigenvalues().reverse().cwiseMax(0.0).cwiseSqrt();
  v.leftCols(r) = q * eig.eigenvectors().rowwise().reverse();
  return true;
}

// Right singular vectors and values of a, of which only the values above `resolve` (and their
// vectors) need to be exact: truncation keeps those and drops the rest. Tall or square a: on the
// subspace that matters (reduced_right_singular) where that is smaller, else from Gram matrices in
// double (gram_right_singular); 3-6x faster than the SVD on 64 x 64 weights (measured on the
// development VM). Wide a, or resolve <= 0: the SVD.
template <class T, class A>
void right_singular(const A& a, double resolve, Eigen::Matrix<T, Eigen::Dynamic, 1>& S, dense<T>& V) {
  const Eigen::Index n = a.cols();
  if (a.rows() < n || resolve <= 0) {
    dense<T> u;
    thin_svd<T>(a, u, S, V);
    return;
  }
  const dense<double> ad = a.template cast<double>();
  Eigen::VectorXd s;
  dense<double> v;
  if (!reduced_right_singular<double>(ad, resolve, s, v))
    gram_right_singular<double>(ad, resolve, double(n) * std::numeric_limits<double>::epsilon() * ad.norm(), s, v);
  S = s.template cast<T>();
  V = v.template cast<T>();
}

// S_i (p values, descending) and V_i (n x p) of A_i for truncation: values below `resolve` may be
// approximate, or zeros with zero vectors past those resolved (right_singular). A_i is left
// unspecified (the CUDA space writes U_i there).
template <class T>
void svd_right_vbatched(context<host>&, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                        T* const* V, const int* ldv, int count, int /*max_m*/, int /*max_n*/, double resolve) {
  for_each_item(count, [&](int i) {
    const int p = std::min(m[i], n[i]);
    Eigen::Matrix<T, Eigen::Dynamic, 1> s;
    dense<T> v;
    right_singular<T>(map_block(A[i], m[i], n[i], lda[i]), resolve, s, v);
    for (int j = 0; j < p; ++j) S[i][j] = s(j);
    map_block(V[i], n[i], p, ldv[i]) = v.leftCols(p);
  });
}

}  // namespace h2expr::detail
