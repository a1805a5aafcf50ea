#include "reference.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <random>

namespace h2expr::test::reference {

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
  Eigen::VectorXd alpha(steps), beta(steps), w(n), t;
  std::mt19937_64 engine(0x9d2c5680u);
  std::normal_distribution<double> normal;
  for (Eigen::Index i = 0; i < n; ++i) w(i) = normal(engine);
  q.col(0) = w / w.norm();
  Eigen::Index m = 0;
  for (Eigen::Index j = 0; j < steps; ++j) {
    m = j + 1;
    if (tall) {
      t.noalias() = a * q.col(j);
      w.noalias() = a.transpose() * t;
    } else {
      t.noalias() = a.transpose() * q.col(j);
      w.noalias() = a * t;
    }
    alpha(j) = q.col(j).dot(w);
    for (int pass = 0; pass < 2; ++pass) w.noalias() -= q.leftCols(m) * (q.leftCols(m).transpose() * w);
    beta(j) = w.norm();
    if (m == steps || beta(j) <= 1e-14 * std::abs(alpha(0))) break;  // breakdown: an invariant subspace
    q.col(m) = w / beta(j);
  }
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> tridiagonal;
  tridiagonal.computeFromTridiagonal(alpha.head(m), beta.head(m - 1), Eigen::EigenvaluesOnly);
  return std::sqrt(std::max(tridiagonal.eigenvalues()(m - 1), 0.0));
}

// Q applied to the first columns of the identity: the thin factor without forming the square one.
Eigen::MatrixXd orthonormal_columns(const Eigen::MatrixXd& a) {
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

Eigen::VectorXd symmetric_eigenvalues(const Eigen::MatrixXd& a) {
  return Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(a, Eigen::EigenvaluesOnly).eigenvalues();
}

}  // namespace h2expr::test::reference
