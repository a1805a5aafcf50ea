#pragma once
// Compression benchmark, written once for every space: the reference problems of TARGETS.md beside
// the peer's figures, then a sweep over n (time should grow linearly).
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace h2expr::bench {

template <class T, class Space>
double low_rank_mb(const h2_matrix<T, Space>& A) {
  return double(A.memory_bytes() - A.data().dense.size() * sizeof(T)) * 1e-6;
}

template <class T, class Space, int D, class Kernel>
void compress_problem(const std::string& name, const point_cloud<T, D>& pts, const Kernel& k, build_options bo,
                      double tol) {
  try {
    auto A = h2_matrix<T, Space>::from_kernel(pts, k, bo);
    const double before = low_rank_mb(A);
    const auto rep = compress(A, tol);
    std::string ranks;
    for (int r : rep.ranks_after) ranks += std::to_string(r) + " ";
    std::printf("| %-26s | %8zu | %6.0e | %8.3f | %8.3f | %8.3f | %8.3f | %8.3f | %9.1f | %8.1f | %8.1e | %s|\n",
                name.c_str(), std::size_t(pts.size()), tol, rep.seconds_orthogonalize, rep.seconds_weights,
                rep.seconds_truncation, rep.seconds_projection,
                rep.seconds_orthogonalize + rep.seconds_weights + rep.seconds_truncation + rep.seconds_projection, before,
                low_rank_mb(A), rep.error_estimate, ranks.c_str());
  } catch (const device_out_of_memory&) {
    std::printf("| %-26s | %8zu | out of device memory: skipped\n", name.c_str(), std::size_t(pts.size()));
  }
  std::fflush(stdout);
}

template <class Space>
void run_compress_benchmarks(int max_log_n) {
  std::printf("\n## Reference problems (TARGETS.md). Peer (H2Opus CPU, 2 cores), compression to 1e-4 after\n"
              "## orthogonalization: 2D orthogonalization 0.32 s, compression 0.43 s, low-rank memory 532 -> 21 MB,\n"
              "## error 8.1e-5, ranks 0 0 12 18 28 24 20 17 15 11 8; 3D 0.38 s, 0.74 s, 692 -> 154 MB, error 1.4e-4,\n"
              "## ranks 0 0 0 16 27 30 39 38 32 27 24. Error: ||A - A_c||_2 / ||A||_2 by power iteration.\n\n");
  std::printf("| %-26s | %8s | %6s | %8s | %8s | %8s | %8s | %8s | %9s | %8s | %8s | %s |\n", "problem", "n", "tol",
              "orth (s)", "weights", "trunc", "project", "total", "LR MB in", "LR MB out", "error", "ranks per level");
  std::printf("|----------------------------|----------|--------|----------|----------|----------|----------|----------|"
              "-----------|----------|----------|-----|\n");
  for (double tol : {1e-4, 1e-7}) {
    compress_problem<double, Space>("TARGETS 2D exp l=0.1 p=8", point_cloud<double, 2>::grid({256, 256}),
                                    kernels::exponential{0.1}, {.leaf_size = 64, .eta = 1.0, .cheb_points = 8}, tol);
    compress_problem<double, Space>("TARGETS 3D exp l=0.2 p=4", point_cloud<double, 3>::grid({40, 40, 40}),
                                    kernels::exponential{0.2}, {.leaf_size = 64, .eta = 1.0, .cheb_points = 4}, tol);
  }
  std::printf("\n## Sweep (eta 0.9, leaf 64): time should grow linearly with n\n\n");
  for (int logn = 14; logn <= max_log_n; logn += 2) {
    const int g2 = 1 << (logn / 2);
    compress_problem<double, Space>("2D exp l=0.1 p=8", point_cloud<double, 2>::grid({g2, g2}, 0.1, 1),
                                    kernels::exponential{0.1}, {.leaf_size = 64, .cheb_points = 8}, 1e-4);
    const int g3 = int(std::lround(std::cbrt(double(1 << logn))));
    compress_problem<double, Space>("3D exp l=0.2 p=4", point_cloud<double, 3>::grid({g3, g3, g3}, 0.1, 1),
                                    kernels::exponential{0.2}, {.leaf_size = 64, .cheb_points = 4}, 1e-4);
  }
}

}  // namespace h2expr::bench
