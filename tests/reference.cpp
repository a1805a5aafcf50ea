#include "reference.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <Eigen/SparseCholesky>
#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>
#if defined(H2EXPR_HAS_OPENBLAS)
#include <h2expr/detail/primitives/host/blas.hpp>
#endif

namespace h2expr::test::reference {

namespace {
// y = op(a(:, 0:cols)) x + beta y (gemv): BLAS's where the build has it, so that the Lanczos steps below do
// not run in Eigen's kernels compiled with the sanitizers (80% of an H2 suite's test there). Not
// detail::gemm_item, the library's product: a reference must not share the code that it checks.
void gemv(const Eigen::MatrixXd& a, Eigen::Index cols, bool transpose, const double* x, double beta, double* y) {
  const Eigen::Index rows = a.rows();
  if (rows == 0 || cols == 0) {
    const Eigen::Index ny = transpose ? cols : rows;
    for (Eigen::Index i = 0; i < ny; ++i) y[i] = beta == 0 ? 0.0 : beta * y[i];  // beta = 0 does not read y
    return;
  }
#if defined(H2EXPR_HAS_OPENBLAS)
  cblas_dgemv(CblasColMajor, transpose ? CblasTrans : CblasNoTrans, blasint(rows), blasint(cols), 1.0, a.data(),
              blasint(rows), x, 1, beta, y, 1);
#else
  const auto block = a.leftCols(cols);
  Eigen::Map<Eigen::VectorXd> out(y, transpose ? cols : rows);
  if (beta == 0) out.setZero();  // beta = 0 does not read y
  else out *= beta;
  if (transpose) out.noalias() += block.transpose() * Eigen::Map<const Eigen::VectorXd>(x, rows);
  else out.noalias() += block * Eigen::Map<const Eigen::VectorXd>(x, cols);
#endif
}
}  // namespace

Eigen::VectorXd singular_values(const Eigen::MatrixXd& a) { return Eigen::JacobiSVD<Eigen::MatrixXd>(a).singularValues(); }

// Lanczos on a^T a (or a a^T, the smaller) with full reorthogonalization, from a fixed random start:
// ~5x faster than an SVD at n = 1024 (the H2 tests take several 2-norms of 1024^2 matrices, and under
// ASan each SVD took 7 s). With 200 steps, a result more than 0.2% low has probability under 1e-9
// for any matrix with n <= 1024 (Kuczynski and Wozniakowski 1992); measured to 1e-14 on flat and clustered
// spectra. Up to 200 columns the Krylov space is the whole space and the value exact.
double two_norm(const Eigen::MatrixXd& a) {
  if (a.size() == 0) return 0.0;
  const bool tall = a.rows() >= a.cols();
  const Eigen::Index n = tall ? a.cols() : a.rows(), steps = std::min<Eigen::Index>(n, 200);
  Eigen::MatrixXd q(n, steps);
  Eigen::VectorXd alpha(steps), beta(steps), w(n), t(tall ? a.rows() : a.cols()), h(steps);
  std::mt19937_64 engine(0x9d2c5680u);
  std::normal_distribution<double> normal;
  for (Eigen::Index i = 0; i < n; ++i) w(i) = normal(engine);
  q.col(0) = w / w.norm();
  Eigen::Index m = 0;
  for (Eigen::Index j = 0; j < steps; ++j) {
    m = j + 1;
    gemv(a, a.cols(), !tall, q.col(j).data(), 0.0, t.data());  // t = A q_j (tall) or A^T q_j
    gemv(a, a.cols(), tall, t.data(), 0.0, w.data());           // w = A^T t (tall) or A t
    alpha(j) = q.col(j).dot(w);
    for (int pass = 0; pass < 2; ++pass) {  // w -= Q (Q^T w), twice
      gemv(q, m, true, w.data(), 0.0, h.data());
      for (Eigen::Index i = 0; i < m; ++i) h(i) = -h(i);
      gemv(q, m, false, h.data(), 1.0, w.data());
    }
    beta(j) = w.norm();
    if (m == steps || beta(j) <= 1e-14 * std::abs(alpha(0))) break;  // breakdown: an invariant subspace
    q.col(m) = w / beta(j);
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> tridiagonal;
  tridiagonal.computeFromTridiagonal(alpha.head(m), beta.head(m - 1), Eigen::EigenvaluesOnly);
  return std::sqrt(std::max(tridiagonal.eigenvalues()(m - 1), 0.0));
}

// Q applied to the first columns of the identity: the thin factor without forming the square one. In
// LAPACK where the build has it: the tests draw thousands of random bases, and Eigen's QR compiled with
// the sanitizers took half of the ARA suite's time there.
Eigen::MatrixXd orthonormal_columns(const Eigen::MatrixXd& a) {
#if defined(H2EXPR_HAS_OPENBLAS)
  if (a.cols() > 0 && a.rows() >= a.cols()) {
    Eigen::MatrixXd q = a;
    std::vector<double> tau, work;
    const int m = int(a.rows()), n = int(a.cols());
    detail::lapack_geqrf(m, n, q.data(), m, tau, work);
    detail::lapack_orgqr(m, n, q.data(), m, tau, work);
    return q;
  }
#endif
  Eigen::MatrixXd q = Eigen::MatrixXd::Identity(a.rows(), a.cols());
  q.applyOnTheLeft(Eigen::HouseholderQR<Eigen::MatrixXd>(a).householderQ());
  return q;
}

Eigen::VectorXd householder_r_diagonal(const Eigen::MatrixXd& a) {
  return Eigen::HouseholderQR<Eigen::MatrixXd>(a).matrixQR().diagonal().cwiseAbs();
}

Eigen::MatrixXd cholesky_lower(const Eigen::MatrixXd& a) { return Eigen::LLT<Eigen::MatrixXd>(a).matrixL(); }

bool cholesky_solve(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, Eigen::MatrixXd& x) {
  const Eigen::LLT<Eigen::MatrixXd> llt(a);
  if (llt.info() != Eigen::Success) return false;
  x = llt.solve(b);
  return true;
}

bool cholesky_solve(const Eigen::SparseMatrix<double>& a, const Eigen::MatrixXd& b, Eigen::MatrixXd& x) {
  const Eigen::SimplicialLLT<Eigen::SparseMatrix<double>> llt(a);
  if (llt.info() != Eigen::Success) return false;
  x = llt.solve(b);
  return true;
}

Eigen::MatrixXd product(const Eigen::MatrixXd& a, bool transpose_a, const Eigen::MatrixXd& b, bool transpose_b) {
  const Eigen::Index m = transpose_a ? a.cols() : a.rows(), k = transpose_a ? a.rows() : a.cols();
  const Eigen::Index n = transpose_b ? b.rows() : b.cols();
  if (k != (transpose_b ? b.cols() : b.rows())) throw std::invalid_argument("reference::product: shapes differ");
  Eigen::MatrixXd c = Eigen::MatrixXd::Zero(m, n);
#if defined(H2EXPR_HAS_OPENBLAS)
  if (m > 0 && n > 0 && k > 0)
    cblas_dgemm(CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
                blasint(m), blasint(n), blasint(k), 1.0, a.data(), blasint(a.rows()), b.data(), blasint(b.rows()), 0.0,
                c.data(), blasint(m));
#else
  if (transpose_a && transpose_b) c.noalias() = a.transpose() * b.transpose();
  else if (transpose_a) c.noalias() = a.transpose() * b;
  else if (transpose_b) c.noalias() = a * b.transpose();
  else c.noalias() = a * b;
#endif
  return c;
}

Eigen::VectorXd symmetric_eigenvalues(const Eigen::MatrixXd& a) {
  return Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(a, Eigen::EigenvaluesOnly).eigenvalues();
}

template <class A, class E>
double relative_error(const Eigen::Ref<const Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic>>& approx,
                      const Eigen::Ref<const Eigen::Matrix<E, Eigen::Dynamic, Eigen::Dynamic>>& exact) {
  const Eigen::MatrixXd e = exact.template cast<double>();
  const double ref = e.norm();
  const double diff = (approx.template cast<double>() - e).norm();
  return ref > 0 ? diff / ref : diff;
}
template double relative_error<float, float>(const Eigen::Ref<const Eigen::MatrixXf>&, const Eigen::Ref<const Eigen::MatrixXf>&);
template double relative_error<float, double>(const Eigen::Ref<const Eigen::MatrixXf>&, const Eigen::Ref<const Eigen::MatrixXd>&);
template double relative_error<double, float>(const Eigen::Ref<const Eigen::MatrixXd>&, const Eigen::Ref<const Eigen::MatrixXf>&);
template double relative_error<double, double>(const Eigen::Ref<const Eigen::MatrixXd>&, const Eigen::Ref<const Eigen::MatrixXd>&);

template <class T>
void fill_normal(std::mt19937_64& engine, T* out, std::size_t n) {
  std::normal_distribution<double> d;
  for (std::size_t i = 0; i < n; ++i) out[i] = T(d(engine));
}
template void fill_normal<float>(std::mt19937_64&, float*, std::size_t);
template void fill_normal<double>(std::mt19937_64&, double*, std::size_t);

}  // namespace h2expr::test::reference
