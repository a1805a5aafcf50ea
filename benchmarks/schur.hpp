#pragma once
// Schur complement benchmark, written once for every space (the HARA paper's Table 1): for 2D and 3D
// Poisson problems, S = hara(A22 - A21 * solve(cholesky(A11)) * A12, 1e-4) on the interface structure
// (weak admissibility in 2D, standard in 3D, as in the paper). Reports the factorization, the sampling
// time split into triangular solves and the rest (sparse products, sums), ARA, updates and
// recompression, ranks, memory and error, beside the paper's P100 figures. A second table shows what
// blocking the samples buys: one product of the Schur expression with 32 vectors at once against 32
// products with one vector, and the triangular solves' memory rate against the measured bandwidth.
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "../examples/poisson.hpp"
#include "timing.hpp"

namespace h2expr::bench {

struct paper_row {
  int samples;
  double sampling_seconds;
};

// The paper's Table 1 (P100, 1e-4), where it has the problem.
inline const paper_row* paper_table1(int dim, int n) {
  static const paper_row r2d1024{34, 14.1}, r2d2048{42, 39.8}, r3d32{152, 3.52}, r3d64{397, 140.7};
  if (dim == 2 && n == 1024) return &r2d1024;
  if (dim == 2 && n == 2048) return &r2d2048;
  if (dim == 3 && n == 32) return &r3d32;
  if (dim == 3 && n == 64) return &r3d64;
  return nullptr;
}

// The blocks of a Poisson problem as sparse operands, and the structure S is built on (weak
// admissibility in 2D, standard in 3D, as in the paper).
template <class Space, int D>
struct schur_operands {
  examples::schur_problem<double, D> p;
  context_ptr<Space> ctx = default_context<Space>();
  sparse_matrix<double, Space> A11, A12, A21, A22;
  explicit schur_operands(int n)
      : p(examples::poisson_schur_problem<double, D>(n)),
        A11(sparse_matrix<double, Space>::from_eigen(p.A11, ctx)),
        A12(sparse_matrix<double, Space>::from_eigen(p.A12, ctx)),
        A21(sparse_matrix<double, Space>::from_eigen(p.A21, ctx)),
        A22(sparse_matrix<double, Space>::from_eigen(p.A22, ctx)) {}
  ::h2expr::structure<double> interface() const {
    if constexpr (D == 2) return ::h2expr::structure<double>::weak(A22.rows(), 64);
    else
      return ::h2expr::structure<double>::from_points(point_cloud<double, D - 1>(p.interface),
                                                      {.leaf_size = 64, .eta = 0.9});
  }
};

// "256,512,1024" -> {256, 512, 1024}; no argument: the fallback.
inline std::vector<int> parse_grids(const char* arg, std::vector<int> fallback) {
  if (!arg) return fallback;
  std::vector<int> g;
  std::stringstream ss(arg);
  for (std::string item; std::getline(ss, item, ',');)
    if (std::atoi(item.c_str()) > 0) g.push_back(std::atoi(item.c_str()));
  return g;
}

inline void schur_header() {
  std::printf("| %-12s | %8s | %6s | %7s | %8s | %8s | %8s | %8s | %7s | %8s | %8s | %7s | %8s | %-26s | %s |\n",
              "problem", "A11 n", "S n", "samples", "factor", "sampling", "solves", "other", "ARA", "upd+comp",
              "total", "MB", "err F", "ranks per level", "paper P100: samples, sampling");
  std::printf("|--------------|----------|--------|---------|----------|----------|----------|----------|---------|"
              "----------|----------|---------|----------|----------------------------|------|\n");
}

template <class Space, int D>
void schur_problem_row(int n, double tol) {
  using T = double;
  using clock = std::chrono::steady_clock;
  const std::string name = std::to_string(n) + (D == 2 ? "^2" : "^3") + " (" + std::to_string(D) + "D)";
  try {
    const schur_operands<Space, D> ops(n);
    const auto& [p, ctx, A11, A12, A21, A22] = ops;
    const auto t0 = clock::now();
    auto F = cholesky(A11);
    ctx->synchronize();
    const double factor = std::chrono::duration<double>(clock::now() - t0).count();
    // The solve as a timed symmetric sampler: the expression stays A22 - A21 S^{-1} A12 (symmetric).
    double solve_seconds = 0;
    sampler<T, Space> timed_solve(F.rows(), [&](const_view<T, Space> in, view<T, Space> out) {
      const auto s0 = clock::now();
      F.solve(in, out);
      ctx->synchronize();
      solve_seconds += std::chrono::duration<double>(clock::now() - s0).count();
    });
    hara_report rep;
    auto S = hara(A22 - A21 * timed_solve * A12, tol, {.structure = ops.interface(), .report = &rep});
    const double solves_in_hara = solve_seconds;
    const auto e = detail::probe(as_sampler(S), as_sampler(A22 - A21 * solve(F) * A12), 10, 99);
    std::string ranks;
    for (int r : S.ranks()) ranks += std::to_string(r) + " ";
    std::string paper = "-";
    if (const paper_row* pr = paper_table1(D, n))
      paper = std::to_string(pr->samples) + ", " + std::to_string(pr->sampling_seconds).substr(0, 5) + " s";
    std::printf("| %-12s | %8lld | %6lld | %7d | %8.2f | %8.2f | %8.2f | %8.2f | %7.2f | %8.2f | %8.2f | %7.2f | %8.1e | "
                "%-26s | %s |\n",
                name.c_str(), (long long)A11.rows(), (long long)A22.rows(), rep.samples, factor, rep.seconds_sampling,
                solves_in_hara, rep.seconds_sampling - solves_in_hara, rep.seconds_ara,
                rep.seconds_update + rep.seconds_compress, factor + rep.seconds, S.memory_bytes() * 1e-6, e.frobenius,
                ranks.c_str(), paper.c_str());
  } catch (const device_out_of_memory&) {
    std::printf("| %-12s | out of device memory: skipped\n", name.c_str());
  } catch (const error& e) {
    std::printf("| %-12s | %s\n", name.c_str(), e.what());
  }
  std::fflush(stdout);
}

// Memory bandwidth of the space, from a large copy (read + write), GB/s: the ceiling of the triangular solves.
template <class Space>
double copy_bandwidth(context<Space>& ctx) {
  const std::size_t n = std::size_t(1) << 26;  // 512 MB of doubles per array
  auto a = matrix<double, Space>(index(n), 1), b = matrix<double, Space>(index(n), 1);
  const double s = best_seconds(ctx, [&] { detail::copy(ctx, a.data(), b.data(), n); }, 3);
  return 2.0 * n * sizeof(double) / s * 1e-9;
}

// One product of the Schur expression with k vectors at once against k products with one vector.
template <class Space, int D>
void blocked_row(int n, int k, double bandwidth) {
  using T = double;
  const std::string name = std::to_string(n) + (D == 2 ? "^2" : "^3") + " (" + std::to_string(D) + "D)";
  try {
    const schur_operands<Space, D> ops(n);
    const auto& [p, ctx, A11, A12, A21, A22] = ops;
    auto F = cholesky(A11);
    auto schur = A22 - A21 * solve(F) * A12;
    auto X = matrix<T, Space>::random(A22.rows(), k, 5, ctx);
    std::vector<matrix<T, Space>> columns;
    for (int j = 0; j < k; ++j) columns.push_back(matrix<T, Space>(X.view().columns(j, 1), ctx));
    const int runs = 2;
    const double blocked = best_seconds(*ctx, [&] { (void)(schur * X); }, runs);
    const double single = best_seconds(*ctx, [&] { for (const auto& x : columns) (void)(schur * x); }, runs);
    auto Y = matrix<T, Space>::uninitialized(F.rows(), k, ctx), Z = Y;
    const double solve_blocked = best_seconds(*ctx, [&] { F.solve(Y.view(), Z.view()); }, runs);
    // A blocked solve reads L twice (forward, backward; 12 bytes per nonzero: value, index) and does
    // 4 flops per nonzero and vector.
    const double bytes = 2.0 * double(F.factor_nnz()) * 12, flops = 4.0 * double(F.factor_nnz()) * k;
    std::printf("| %-12s | %8lld | %3d | %10.3f | %10.3f | %6.1fx | %10.3f | %8.2f | %8.1f | %8.1f |\n", name.c_str(),
                (long long)F.rows(), k, blocked * 1e3 / k, single * 1e3 / k, single / blocked, solve_blocked * 1e3 / k,
                flops / solve_blocked * 1e-9, bytes / solve_blocked * 1e-9, bandwidth);
  } catch (const error& e) {
    std::printf("| %-12s | %s\n", name.c_str(), e.what());
  }
  std::fflush(stdout);
}

// grids_2d, grids_3d: the problems to run (n per direction).
template <class Space>
void run_schur_benchmarks(const std::vector<int>& grids_2d, const std::vector<int>& grids_3d, double tol = 1e-4) {
  std::printf("\n## Schur complements S = hara(A22 - A21 * solve(cholesky(A11)) * A12, %.0e) of Poisson problems\n"
              "## (block 2: one boundary face). Seconds; 'solves' and 'other' split hara's sampling; total =\n"
              "## factor + hara. err F: ||(S - M) X||_F / ||M X||_F over 10 probes.\n\n",
              tol);
  schur_header();
  for (int n : grids_2d) schur_problem_row<Space, 2>(n, tol);
  for (int n : grids_3d) schur_problem_row<Space, 3>(n, tol);

  auto ctx = default_context<Space>();
  const double bandwidth = copy_bandwidth(*ctx);
  std::printf("\n## Blocked sampling: the Schur expression times 32 vectors at once vs one at a time (ms per vector);\n"
              "## the blocked triangular solves alone: ms per vector, GFLOP/s (4 flops per nonzero of L and vector)\n"
              "## and the rate of reading L (12 bytes per nonzero, twice per block) against the measured copy bandwidth.\n\n");
  std::printf("| %-12s | %8s | %3s | %10s | %10s | %7s | %10s | %8s | %8s | %8s |\n", "problem", "A11 n", "k", "blocked",
              "one-by-one", "speedup", "solve only", "GFLOP/s", "L GB/s", "copy GB/s");
  std::printf("|--------------|----------|-----|------------|------------|---------|------------|----------|----------|"
              "----------|\n");
  for (int n : grids_2d) blocked_row<Space, 2>(n, 32, bandwidth);
  for (int n : grids_3d) blocked_row<Space, 3>(n, 32, bandwidth);
}

}  // namespace h2expr::bench
