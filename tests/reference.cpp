#include "reference.hpp"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>
#include <Eigen/SVD>

namespace h2expr::test::reference {

Eigen::VectorXd singular_values(const Eigen::MatrixXd& a) { return Eigen::JacobiSVD<Eigen::MatrixXd>(a).singularValues(); }

double two_norm(const Eigen::MatrixXd& a) {
  return a.size() == 0 ? 0.0 : Eigen::BDCSVD<Eigen::MatrixXd>(a).singularValues()(0);
}

Eigen::MatrixXd householder_q(const Eigen::MatrixXd& a) { return Eigen::HouseholderQR<Eigen::MatrixXd>(a).householderQ(); }

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
