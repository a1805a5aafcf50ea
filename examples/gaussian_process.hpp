// Gaussian-process regression with an H2 covariance: noisy observations y of a smooth function at n
// jittered grid points, the weights alpha = (K + sigma^2 I)^{-1} y by conjugate gradients, plain and
// preconditioned by the H2 inverse (Newton-Schulz, hx::inverse), and the posterior mean K alpha at the
// points against the noiseless function. Prints iterations, times and errors; exits 1 when a solve
// misses its residual or the preconditioned one takes more than 10 iterations.
#pragma once
#include <h2expr/diagonal_matrix.hpp>
#include <h2expr/h2_matrix.hpp>
#include <h2expr/inverse.hpp>
#include <h2expr/krylov.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

template <class Space>
int gaussian_process(const char* space_name, int grid, double solve_tol) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };
  const double sigma2 = 1e-2;  // the noise variance: the nugget
  auto pts = hx::point_cloud<double, 2>::grid({grid, grid}, /*perturb=*/0.2, /*seed=*/3);
  const int n = pts.size();
  auto t0 = clock::now();
  auto K = hx::h2_matrix<double, Space>::from_kernel(pts, hx::kernels::matern{0.15},
                                                      {.leaf_size = 64, .eta = 0.9, .cheb_points = 8});
  std::printf("K: Matern 3/2 (length 0.15) on a %d x %d grid (%s), n = %d, %.1f MB, %.2f s\n", grid, grid, space_name, n,
              K.memory_bytes() / 1e6, since(t0));
  // Observations: f(x) = sin(4 x0) cos(3 x1) plus noise of variance sigma^2.
  Eigen::VectorXd f(n), y(n);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> noise(0.0, std::sqrt(sigma2));
  for (int i = 0; i < n; ++i) f(i) = std::sin(4 * pts[i][0]) * std::cos(3 * pts[i][1]), y(i) = f(i) + noise(rng);
  const hx::matrix<double, Space> Y(y);
  const auto I = hx::identity<double, Space>(n);
  auto C = K + sigma2 * I;  // the covariance of the observations, as an expression

  auto plain = hx::cg(C, Y, solve_tol, {.max_iterations = 5000});
  std::printf("cg: %d iterations, %.2f s, residual %.1e\n", plain.iterations, plain.seconds, plain.residual);
  hx::inverse_report rep;
  t0 = clock::now();
  // A preconditioner needs no tight inverse: 0.1 saves the last, highest-rank steps and still leaves CG
  // a few iterations (benchmarks/results/host-inverse-tolerance.txt).
  auto X = hx::inverse(C, 0.1, {.report = &rep});
  const double t_inverse = since(t0);
  std::printf("inverse(K + sigma^2 I, 0.1): %d Newton-Schulz steps, %.2f s, %.1f MB, residual %.1e, ranks", rep.iterations,
              t_inverse, X.memory_bytes() / 1e6, rep.residual.back());
  for (int r : X.ranks()) std::printf(" %d", r);
  std::printf("\n");
  auto pre = hx::cg(C, Y, solve_tol, {}, X);
  std::printf("cg preconditioned by it: %d iterations, %.2f s, residual %.1e\n", pre.iterations, pre.seconds, pre.residual);

  // The posterior mean at the points, K alpha, against the noiseless f.
  const Eigen::VectorXd mean = hx::to_dense(K * pre.x).col(0);
  const double rms_mean = (mean - f).norm() / std::sqrt(double(n)), rms_noise = (y - f).norm() / std::sqrt(double(n));
  std::printf("posterior mean: rms error %.3e against f (the observations' noise: %.3e)\n", rms_mean, rms_noise);
  const double check = (hx::to_dense(C * pre.x).col(0) - y).norm() / y.norm();
  std::printf("||y - (K + sigma^2 I) alpha|| / ||y|| = %.1e\n", check);
  return plain.residual <= solve_tol && check <= 2 * solve_tol && pre.iterations <= 10 && rms_mean < rms_noise ? 0 : 1;
}
