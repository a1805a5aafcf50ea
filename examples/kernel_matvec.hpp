#pragma once
// Build the H2 matrix of a kernel on a point cloud and multiply it by a block of vectors: sizes,
// memory, time, and the error against exact dense sums on a sample of rows. Written once for any space.
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

template <class Space>
int kernel_matvec(const char* space_name, int grid = 128) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };

  auto pts = hx::point_cloud<double, 2>::grid({grid, grid}, /*perturb=*/0.1, /*seed=*/7);  // in [0,1]^2
  hx::kernels::exponential kernel{/*correlation length=*/0.1};                              // exp(-r/l)
  hx::build_options bo{.leaf_size = 64, .eta = 0.9, .cheb_points = 8};

  auto t0 = clock::now();
  auto A = hx::h2_matrix<double, Space>::from_kernel(pts, kernel, bo);
  A.context().synchronize();
  const double build = seconds(t0);
  const double n = double(A.rows());
  std::printf("h2expr: exp(-r/0.1) on a %d x %d grid, %s space\n", grid, grid, space_name);
  std::printf("  n = %.0f, depth %d, rank %d, low-rank blocks %d, dense blocks %d\n", n, A.structure().depth(),
              A.ranks().back(), [&] { int s = 0; for (int b : A.structure().low_rank_blocks_per_level()) s += b; return s; }(),
              A.structure().dense_blocks());
  std::printf("  memory: %.1f MB (dense: %.1f MB), built in %.3f s\n", A.memory_bytes() * 1e-6, n * n * 8e-6, build);

  auto X = hx::matrix<double, Space>::random(A.cols(), 16, /*seed=*/1);
  hx::matrix<double, Space> Y = A * X;  // warm-up
  t0 = clock::now();
  Y = A * X;
  A.context().synchronize();
  const double t = seconds(t0);
  hx::matrix<double, Space> Z = hx::transpose(A) * X;  // symmetric kernel: the same product
  std::printf("  Y = A * X with 16 vectors: %.2f ms\n", t * 1e3);

  // Exact sums for 100 sampled rows.
  const Eigen::MatrixXd x = hx::to_dense(X), y = hx::to_dense(Y), z = hx::to_dense(Z);
  double num = 0, den = 0, sym = 0;
  for (int s = 0; s < 100; ++s) {
    const int i = int((s * 7919L) % A.rows());
    Eigen::RowVectorXd exact = Eigen::RowVectorXd::Zero(16);
    for (int j = 0; j < A.cols(); ++j) exact += kernel(pts[i], pts[j]) * x.row(j);
    num += (y.row(i) - exact).squaredNorm(), den += exact.squaredNorm();
    sym += (z.row(i) - y.row(i)).squaredNorm();
  }
  const double err = std::sqrt(num / den);
  std::printf("  relative error vs exact rows: %.1e; ||A^T X - A X|| / ||A X|| on them: %.1e\n", err, std::sqrt(sym / den));

  // Recompression to 1e-4 (relative to ||A||_2): orthogonalize, basis generation, truncation, projection.
  auto rep = hx::compress(A, 1e-4, {.estimate_error = true});
  std::printf("  compress(A, 1e-4): %.1f MB -> %.1f MB, error %.1e (2-norm, relative; ||A||_2 ~ %.1f)\n",
              rep.memory_before * 1e-6, rep.memory_after * 1e-6, *rep.error_estimate, rep.norm_estimate);
  std::printf("    node ranks per level, smallest/average/largest (each node stored at its own rank):");
  for (std::size_t l = 0; l < rep.ranks_after.size(); ++l)
    std::printf(" %d/%.0f/%d", rep.node_rank_min[l], rep.node_rank_avg[l], rep.node_rank_max[l]);
  std::printf("\n    time: orthogonalize %.3f s, weights %.3f s, truncation %.3f s, projection %.3f s (%.1f GFLOP/s)\n",
              rep.seconds_orthogonalize, rep.seconds_weights, rep.seconds_truncation, rep.seconds_projection,
              rep.flops() / rep.seconds() * 1e-9);
  Y = A * X;  // warm-up
  t0 = clock::now();
  Y = A * X;
  A.context().synchronize();
  std::printf("  Y = A * X after compression: %.2f ms\n", seconds(t0) * 1e3);
  return err < 1e-3 && *rep.error_estimate < 1e-3 ? 0 : 1;
}
