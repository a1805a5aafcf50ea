// H2 algebra written as C++: Q = hara(A + 2 * transpose(A) - A * A, tol). The expression is sampled
// as one operator (an HGEMV for A and A^T each, two for A * A, summed into one block of vectors) and
// rebuilt as a new H2 matrix; it is symmetric when A is, and hara then samples half the blocks.
// Prints the error (randomized estimate against the expression), memory and time; exits 1 when the
// error misses 2 tol.
#pragma once
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cstdio>

template <class Space>
int expression_algebra(const char* space_name, int grid, double tol) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  auto pts = hx::point_cloud<double, 2>::grid({grid, grid}, /*perturb=*/0.1, /*seed=*/7);
  hx::build_options bo{.leaf_size = 64, .eta = 0.9, .cheb_points = 8};
  auto A = hx::h2_matrix<double, Space>::from_kernel(pts, hx::kernels::exponential{0.1}, bo);
  hx::compress(A, 1e-7);
  std::printf("A: exp(-r/0.1) on a %d x %d grid (%s), n = %lld, %.1f MB\n", grid, grid, space_name,
              (long long)A.rows(), A.memory_bytes() / 1e6);

  hx::hara_report rep;
  const auto t0 = clock::now();
  auto Q = hx::hara(A + 2 * hx::transpose(A) - A * A, tol, {.report = &rep});
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  const double err = hx::relative_error(Q, A + 2 * hx::transpose(A) - A * A, /*probes=*/10);
  std::printf("Q = hara(A + 2 A^T - A A, %.0e): %.2f s, %d samples, %.1f MB, error %.2e%s\n", tol, seconds,
              rep.samples, Q.memory_bytes() / 1e6, err, Q.symmetric() ? " (sampled as symmetric)" : "");
  std::printf("  ranks per level:");
  for (int r : Q.ranks()) std::printf(" %d", r);
  std::printf("\n");
  return err <= 2 * tol ? 0 : 1;
}
