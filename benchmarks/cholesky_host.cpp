// Sparse Cholesky of 3D Poisson matrices (7-point, Dirichlet): cholesky(S) as the build has it
// (CHOLMOD's supernodal factorization where found) against Eigen's simplicial LLT with an AMD
// ordering (the fallback without CHOLMOD), in one run, double. The Eigen factorization is timed once
// (minutes at 64^3); cholesky(S) after a warm-up, best of 3 (first call also shown).
// Usage: bench_cholesky_host [grids, e.g. 40,64]
#include "timing.hpp"

#include <h2expr/cholesky.hpp>
#include <h2expr/matrix.hpp>

#include <Eigen/SparseCholesky>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

Eigen::SparseMatrix<double> poisson_3d(int m) {
  std::vector<Eigen::Triplet<double>> t;
  auto id = [m](int x, int y, int z) { return x + m * (y + m * z); };
  for (int z = 0; z < m; ++z)
    for (int y = 0; y < m; ++y)
      for (int x = 0; x < m; ++x) {
        t.emplace_back(id(x, y, z), id(x, y, z), 6.0);
        if (x > 0) t.emplace_back(id(x, y, z), id(x - 1, y, z), -1.0), t.emplace_back(id(x - 1, y, z), id(x, y, z), -1.0);
        if (y > 0) t.emplace_back(id(x, y, z), id(x, y - 1, z), -1.0), t.emplace_back(id(x, y - 1, z), id(x, y, z), -1.0);
        if (z > 0) t.emplace_back(id(x, y, z), id(x, y, z - 1), -1.0), t.emplace_back(id(x, y, z - 1), id(x, y, z), -1.0);
      }
  Eigen::SparseMatrix<double> S(m * m * m, m * m * m);
  S.setFromTriplets(t.begin(), t.end());
  return S;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  namespace hx = h2expr;
  std::vector<int> grids{40, 64};
  if (argc > 1) {
    grids.clear();
    std::stringstream in(argv[1]);
    for (std::string g; std::getline(in, g, ',');) grids.push_back(std::atoi(g.c_str()));
  }
  auto ctx = hx::default_context<hx::host>();
  using factor = hx::sparse_cholesky<double, hx::host>;
  std::printf("# bench_cholesky_host: cholesky(S) = %s vs Eigen simplicial LLT (AMD), 3D Poisson, double\n",
              factor::method());
  std::printf("# factor: seconds; nnz(L) in millions; solve: 32 vectors, ms per vector; resid: ||S X - B||_F / ||B||_F\n\n");
  std::printf("| grid  |       n | h2expr nnz(L) | first call | best of 3 | solve ms/vec |    resid | Eigen nnz(L) | Eigen factor | speedup |\n");
  std::printf("|-------|---------|---------------|------------|-----------|--------------|----------|--------------|--------------|---------|\n");
  for (int m : grids) {
    const Eigen::SparseMatrix<double> Se = poisson_3d(m);
    const auto S = hx::sparse_matrix<double, hx::host>::from_eigen(Se, ctx);
    auto t0 = std::chrono::steady_clock::now();
    factor F = hx::cholesky(S);
    const double first = seconds_since(t0);
    double best = 1e300;
    for (int r = 0; r < 3; ++r) {
      t0 = std::chrono::steady_clock::now();
      F = hx::cholesky(S);
      best = std::min(best, seconds_since(t0));
    }
    const int k = 32;
    auto B = hx::matrix<double, hx::host>::random(S.rows(), k, 7, ctx);
    auto X = hx::matrix<double, hx::host>::uninitialized(S.rows(), k, ctx);
    const double solve = hx::bench::best_seconds(*ctx, [&] { F.solve(B.view(), X.view()); }, 3);
    const Eigen::MatrixXd Bd = hx::to_dense(B), Xd = hx::to_dense(X);
    const double resid = (Se * Xd - Bd).norm() / Bd.norm();

    t0 = std::chrono::steady_clock::now();
    Eigen::SimplicialLLT<Eigen::SparseMatrix<double>, Eigen::Lower, Eigen::AMDOrdering<int>> llt(Se);
    const double eigen = seconds_since(t0);
    if (llt.info() != Eigen::Success) std::printf("Eigen's factorization failed\n");
    std::printf("| %2d^3  | %7d | %13.2f | %10.3f | %9.3f | %12.3f | %8.1e | %12.2f | %12.2f | %6.1fx |\n", m,
                int(S.rows()), double(F.factor_nnz()) / 1e6, first, best, solve * 1e3 / k, resid,
                double(llt.matrixL().nestedExpression().nonZeros()) / 1e6, eigen, eigen / best);
    std::fflush(stdout);
  }
}
