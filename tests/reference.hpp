#pragma once
// Dense references in double that the tests compare against: Eigen's factorizations, compiled once in
// reference.cpp (the test-support library) instead of in every test translation unit.
#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstddef>
#include <random>

namespace h2expr::test::reference {

Eigen::VectorXd singular_values(const Eigen::MatrixXd& a);        // descending (Jacobi SVD)
double two_norm(const Eigen::MatrixXd& a);                         // the largest singular value; 0 if empty
Eigen::MatrixXd orthonormal_columns(const Eigen::MatrixXd& a);     // the thin Q of a = Q R (rows >= cols)
Eigen::VectorXd householder_r_diagonal(const Eigen::MatrixXd& a);  // |diag(R)| of a = Q R
Eigen::MatrixXd cholesky_lower(const Eigen::MatrixXd& a);          // L of a = L L^T (a must be SPD)
// X = a^{-1} b through the Cholesky factorization of an SPD a; false when a is not positive definite.
bool cholesky_solve(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b, Eigen::MatrixXd& x);
// The same for a sparse a (Eigen's simplicial Cholesky in double): exact to rounding like the dense
// one, without its n^3 (a dense 4,096^2 factorization took 20 s of a test under the sanitizers).
bool cholesky_solve(const Eigen::SparseMatrix<double>& a, const Eigen::MatrixXd& b, Eigen::MatrixXd& x);
// op(a) op(b), op transposing where asked: BLAS's gemm where the build has it (the tests' largest products
// of inputs and checks, which the sanitizers' instrumented Eigen kernels made the slowest part of the
// suites), else Eigen's.
Eigen::MatrixXd product(const Eigen::MatrixXd& a, bool transpose_a, const Eigen::MatrixXd& b, bool transpose_b);
Eigen::VectorXd symmetric_eigenvalues(const Eigen::MatrixXd& a);   // ascending

// The element-wise work of the tests' checks and inputs, compiled here at the build type's flags (the
// test drivers may be compiled at -O0, tests/CMakeLists.txt):
// ||approx - exact||_F / ||exact||_F in double (||approx||_F where exact is 0),
template <class A, class E>
double relative_error(const Eigen::Ref<const Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic>>& approx,
                      const Eigen::Ref<const Eigen::Matrix<E, Eigen::Dynamic, Eigen::Dynamic>>& exact);
// and n standard normal numbers from one std::normal_distribution<double>, in order.
template <class T>
void fill_normal(std::mt19937_64& engine, T* out, std::size_t n);

}  // namespace h2expr::test::reference
