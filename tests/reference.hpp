#pragma once
// Dense references in double that the tests compare against: Eigen's factorizations, compiled once in
// reference.cpp (the test-support library) instead of in every test translation unit.
#include <Eigen/Core>

namespace h2expr::test::reference {

Eigen::VectorXd singular_values(const Eigen::MatrixXd& a);        // descending (Jacobi SVD)
double two_norm(const Eigen::MatrixXd& a);                         // the largest singular value; 0 if empty
Eigen::MatrixXd orthonormal_columns(const Eigen::MatrixXd& a);     // the thin Q of a = Q R (rows >= cols)
Eigen::VectorXd householder_r_diagonal(const Eigen::MatrixXd& a);  // |diag(R)| of a = Q R
Eigen::MatrixXd cholesky_lower(const Eigen::MatrixXd& a);          // L of a = L L^T (a must be SPD)
// X = a^{-1} b through the Cholesky factorization of an SPD a; false when a is not positive definite.
bool cholesky_solve(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, Eigen::MatrixXd& x);
Eigen::VectorXd symmetric_eigenvalues(const Eigen::MatrixXd& a);   // ascending

}  // namespace h2expr::test::reference
