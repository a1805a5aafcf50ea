// Gaussian-process systems K + sigma^2 I (sigma^2 = 1e-2) with an H2 covariance: the Newton-Schulz
// inverse (hx::inverse) at 1e-2 and 1e-4 (steps, time, ranks, memory, residual), CG to 1e-8 on one
// right-hand side without and with inverse(., 1e-2) as preconditioner, the break-even number of
// right-hand sides (inverse + preconditioned CG against plain CG), and the dense Cholesky solve where
// it fits (LAPACK through OpenBLAS on the host). Every time is the call as a user makes it, once.
// A user with many right-hand sides solves them as blocks, whose products cost less per column (H2
// products of 16 columns take 2-3 times one column's, not 16): the same solves on a block of 16 give
// the break-even for solves in blocks of 16.
#pragma once
#include <h2expr/diagonal_matrix.hpp>
#include <h2expr/h2_matrix.hpp>
#include <h2expr/inverse.hpp>
#include <h2expr/krylov.hpp>

#include "timing.hpp"

#include <Eigen/Core>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#if defined(H2EXPR_HAS_OPENBLAS)
extern "C" void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
extern "C" void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
                        const int* ldb, int* info);
#endif

namespace h2expr::bench {

// Grid dimensions with 2^log2n points in D dimensions (as even as powers of two allow).
template <std::size_t D>
std::array<int, D> grid_dims(int log2n) {
  std::array<int, D> dims;
  for (std::size_t k = 0; k < D; ++k) dims[k] = 1 << (log2n / int(D) + (int(k) < log2n % int(D) ? 1 : 0));
  return dims;
}

struct gp_row {
  std::string kernel;
  int dim = 0, log2n = 0;
};

// The dense solve of one right-hand side by Cholesky (factor + solve), or -1 where n is too large.
inline double dense_cholesky_seconds(const Eigen::MatrixXd& a, const Eigen::VectorXd& b) {
#if defined(H2EXPR_HAS_OPENBLAS)
  Eigen::MatrixXd f = a;
  Eigen::VectorXd x = b;
  const int n = int(a.rows()), one = 1;
  int info = 0;
  const auto t0 = std::chrono::steady_clock::now();
  dpotrf_("L", &n, f.data(), &n, &info);
  dpotrs_("L", &n, &one, f.data(), &n, x.data(), &n, &info);
  return info == 0 ? std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() : -1;
#else
  (void)a, (void)b;
  return -1;
#endif
}

template <class Space, std::size_t D, class Kernel>
void gp_benchmark(const char* kernel_name, Kernel kernel, int log2n, const std::vector<double>& tols, int dense_max,
                  bool verbose = false, bool blocks = true) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const double sigma2 = 1e-2, solve_tol = 1e-8;
  auto pts = hx::point_cloud<double, D>::grid(grid_dims<D>(log2n), 0.2, 3);
  const int n = pts.size();
  // In 3D, 6^3 Chebyshev points: with 4^3 the approximation of the Matern kernel is off by more than
  // sigma^2 on K's small eigenvalues, and K + sigma^2 I is indefinite (CG broke down at n = 2^12).
  const hx::build_options bo{.leaf_size = D == 2 ? 64 : 128, .eta = D == 2 ? 0.9 : 1.0, .cheb_points = D == 2 ? 8 : 6};
  auto K = hx::h2_matrix<double, Space>::from_kernel(pts, kernel, bo);
  const auto I = hx::identity<double, Space>(n);
  auto C = K + sigma2 * I;
  const Eigen::VectorXd b = Eigen::VectorXd::Random(n);
  const hx::matrix<double, Space> B(b);
  std::printf("\n## %s, %zuD, n = 2^%d = %d, sigma^2 = %g (K: %.1f MB)\n", kernel_name, D, log2n, n, sigma2,
              K.memory_bytes() / 1e6);
  auto plain = hx::cg(C, B, solve_tol, {.max_iterations = 20000});
  std::printf("cg, no preconditioner:            %5d iterations  %8.2f s  residual %.1e\n", plain.iterations,
              plain.seconds, plain.residual);
  constexpr int block = 16;
  const auto B16 = hx::matrix<double, Space>::random(n, block, 17);
  hx::solve_result<double, Space> plain16;
  if (blocks) {
    plain16 = hx::cg(C, B16, solve_tol, {.max_iterations = 20000});
    std::printf("cg on a block of %d, no preconditioner: %5d iterations  %8.2f s  residual %.1e\n", block,
                plain16.iterations, plain16.seconds, plain16.residual);
  }
  for (double tol : tols) {
    hx::inverse_report rep;
    reset_peak_resident();
    const auto t0 = clock::now();
    auto steps = [&] {
      std::printf("  per step (beta, residual, hara tol, max rank, s; \"cubed\": of order 3):");
      for (std::size_t k = 1; k < rep.residual.size(); ++k)
        std::printf(" [%s%.2f %.1e %.0e %d %.2f]", rep.order[k - 1] == 3 ? "cubed " : "", rep.scaling[k - 1],
                    rep.residual[k], rep.tolerance[k], rep.max_rank[k], rep.seconds[k]);
      std::printf("\n  hara's samples per step:");
      for (const auto& h : rep.steps) std::printf(" %d", h.samples);
      std::printf("\n");
      if (rep.steps.empty() || rep.steps.back().levels.empty()) return;
      // hara's first pass truncates each node to its share of half the error budget, its recompression
      // with the other half; the first pass's ranks (a parent's rows) size the samples and the memory.
      const auto& levels = rep.steps.back().levels;
      const auto& after = levels.back().ranks_after;
      std::printf("  the last step's largest rank per level (1 .. L), hara's first pass / after its recompression:");
      for (std::size_t i = 0; i + 1 < levels.size(); ++i)
        if (levels[i].level >= 0 && std::size_t(levels[i].level) < after.size())
          std::printf(" %d/%d", levels[i].rank_max, after[std::size_t(levels[i].level)]);
      std::printf("\n");
    };
    hx::h2_matrix<double, Space> X;
    try {
      X = hx::inverse(C, tol, {.verbose = verbose, .report = &rep});  // verbose: a line per step on stderr
    } catch (const hx::error& e) {  // out of memory, say: what it reached, then the next tolerance
      std::printf("inverse(., %g): failed after %d steps, %.2f s (peak resident memory %.2f GB): %s\n", tol,
                  rep.iterations, since(t0), peak_resident_bytes() / 1e9, e.what());
      steps();
      continue;
    }
    const double t_inv = since(t0);
    int rank = 0;
    for (int r : X.ranks()) rank = std::max(rank, r);
    std::printf("inverse(., %g): %2d steps  %8.2f s  max rank %3d  %8.1f MB  residual %.1e  samples %d  rejected %d\n",
                tol, rep.iterations, t_inv, rank, X.memory_bytes() / 1e6, rep.residual.back(), rep.samples, rep.rejected);
    steps();
    double sampling = 0, ara = 0, rest = 0;
    for (const auto& h : rep.steps) sampling += h.seconds_sampling, ara += h.seconds_ara, rest += h.seconds - h.seconds_sampling - h.seconds_ara;
    std::printf("  time in hara: sampling %.2f s, ARA %.2f s, the rest %.2f s; outside hara (norm, probes) %.2f s\n", sampling,
                ara, rest, t_inv - sampling - ara - rest);
    std::printf("  peak resident memory during the inverse: %.2f GB (the process's: K and the operator included)\n",
                peak_resident_bytes() / 1e9);
    auto pre = hx::cg(C, B, solve_tol, {}, X);
    std::printf("cg, preconditioned by it:         %5d iterations  %8.2f s  residual %.1e\n", pre.iterations,
                pre.seconds, pre.residual);
    if (pre.seconds < plain.seconds)
      std::printf("break-even: inverse + preconditioned cg beats plain cg from %.1f right-hand sides on "
                  "(%.2f s / (%.2f s - %.2f s))\n",
                  t_inv / (plain.seconds - pre.seconds), t_inv, plain.seconds, pre.seconds);
    else
      std::printf("break-even: none (the preconditioned solve is not faster)\n");
    // One Newton-Schulz step more, applied instead of built: P = 2 X - X C X has I - C P = (I - C X)^2, so
    // C P's smallest eigenvalues double (halving the condition number), for three products with X and one
    // with C per iteration instead of one with X, and no memory: where the next step's hara does not fit.
    // Two such steps: 2 P - P C P with I - C (2 P - P C P) = (I - C X)^4.
    const auto P = 2.0 * X - X * C * X;
    auto applied = [&](const char* what, const auto& M) {
      auto r = hx::cg(C, B, solve_tol, {}, M);
      std::printf("cg, preconditioned by %s (applied, not built): %5d iterations  %8.2f s  residual %.1e\n", what,
                  r.iterations, r.seconds, r.residual);
      if (r.seconds < plain.seconds)
        std::printf("  break-even with it: from %.1f right-hand sides on (%.2f s / (%.2f s - %.2f s))\n",
                    t_inv / (plain.seconds - r.seconds), t_inv, plain.seconds, r.seconds);
    };
    applied("P = 2 X - X C X", P);
    applied("2 P - P C P", 2.0 * P - P * C * P);
    if (!blocks) continue;
    auto pre16 = hx::cg(C, B16, solve_tol, {}, X);
    std::printf("cg on a block of %d, preconditioned: %5d iterations  %8.2f s  residual %.1e\n", block, pre16.iterations,
                pre16.seconds, pre16.residual);
    if (pre16.seconds < plain16.seconds)
      std::printf("break-even in blocks of %d: from %.1f right-hand sides on (%d x %.2f s / (%.2f s - %.2f s))\n", block,
                  block * t_inv / (plain16.seconds - pre16.seconds), block, t_inv, plain16.seconds, pre16.seconds);
    else
      std::printf("break-even in blocks of %d: none (the preconditioned solve is not faster)\n", block);
  }
  if (log2n <= dense_max) {
    Eigen::MatrixXd a = hx::to_dense(C);
    const double t = dense_cholesky_seconds(a, b);
    if (t >= 0) std::printf("dense Cholesky (LAPACK potrf + potrs, OpenBLAS): %.2f s\n", t);
  }
  std::fflush(stdout);
}

}  // namespace h2expr::bench
