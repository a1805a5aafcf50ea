// Squares a kernel matrix with hara(A * A, tol): the product is sampled through two HGEMVs per block
// of vectors and rebuilt as a new compressed H2 matrix. Prints the error (randomized estimate against
// the product itself), memory and time (verbose: hara's line per level too); exits 1 when the error
// misses 2 tol.
#pragma once
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cstdio>
#include <string>

template <class Space>
int square_kernel(const char* space_name, int grid, double tol, bool verbose = false) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  auto pts = hx::point_cloud<double, 2>::grid({grid, grid}, /*perturb=*/0.1, /*seed=*/7);
  hx::build_options bo{.leaf_size = 64, .eta = 0.9, .cheb_points = 8};
  auto A = hx::h2_matrix<double, Space>::from_kernel(pts, hx::kernels::exponential{0.1}, bo);
  hx::compress(A, 1e-7);  // a lean operand: A itself to 1e-7
  std::printf("A: exp(-r/0.1) on a %d x %d grid (%s), n = %lld, %.1f MB\n", grid, grid, space_name,
              (long long)A.rows(), A.memory_bytes() / 1e6);

  hx::hara_report rep;
  const auto t0 = clock::now();
  auto P = hx::hara(A * A, tol, {.block_size = 32, .verbose = verbose, .report = &rep});
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  const double err = hx::relative_error(P, A * A, /*probes=*/10);

  std::printf("P = hara(A * A, %.0e): %.2f s, %d samples, %.1f MB, error %.2e\n", tol, seconds, rep.samples,
              P.memory_bytes() / 1e6, err);
  std::printf("  time: sampling %.2f s, ARA %.2f s, updates %.2f s, recompression %.2f s\n", rep.seconds_sampling,
              rep.seconds_ara, rep.seconds_update, rep.seconds_compress);
  std::printf("  ranks per level:");
  for (int r : P.ranks()) std::printf(" %d", r);
  std::printf("\n");
  return err <= 2 * tol ? 0 : 1;
}
