// Uses the installed headers: a matrix round trip, and a sparse Cholesky solve through the
// factorization the package config found (CHOLMOD where installed), checked against Eigen.
#include <h2expr/detail/primitives/block_batch.hpp>
#include <h2expr/h2expr.hpp>

#include <cstdio>

int main() {
  namespace hx = h2expr;
  auto X = hx::matrix<double>::random(40, 8, 3);
  Eigen::MatrixXd x = hx::to_dense(X);
  hx::matrix<double> Y(x * 2.0);
  const double err = (hx::to_dense(Y) - 2.0 * x).norm();
  std::printf("h2expr consumer: round trip error %.1e\n", err);

  // The 1D Laplacian tridiag(-1, 2, -1) of size 30.
  const int n = 30;
  std::vector<int> ptr{0}, col;
  std::vector<double> val;
  for (int i = 0; i < n; ++i) {
    for (int j = std::max(i - 1, 0); j <= std::min(i + 1, n - 1); ++j) col.push_back(j), val.push_back(i == j ? 2.0 : -1.0);
    ptr.push_back(int(col.size()));
  }
  const auto S = hx::sparse_matrix<double>::from_csr(n, n, ptr, col, val);
  hx::matrix<double> Z(n, 8);
  hx::cholesky(S).solve(X.view().block(0, 0, n, 8), Z.view());
  const double resid = (S.to_eigen() * hx::to_dense(Z) - x.topRows(n)).norm() / x.topRows(n).norm();
  std::printf("h2expr consumer: cholesky (%s) residual %.1e\n", hx::sparse_cholesky<double>::method(), resid);
  return err == 0.0 && resid < 1e-12 ? 0 : 1;
}
