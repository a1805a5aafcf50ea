#pragma once
// HGEMV benchmark, written once for every space: the reference problems of TARGETS.md (beside the
// peer's figures) and a sweep over n, dimensions, kernels and numbers of vectors.
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "timing.hpp"

namespace h2expr::bench {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ||(A x - M x)_S|| / ||(M x)_S|| over sampled rows S, first vector only; M's rows summed exactly.
template <class T, int D, class Kernel>
double sampled_error(const point_cloud<T, D>& pts, const Kernel& k, const Eigen::Matrix<T, -1, -1>& x,
                     const Eigen::Matrix<T, -1, -1>& y, int samples) {
  const int n = int(pts.size());
  double num = 0, den = 0;
  for (int s = 0; s < samples; ++s) {
    const int i = int((std::int64_t(s) * 7919 * 104729) % n);
    for (int v = 0; v < 1; ++v) {
      double exact = 0;
      for (int j = 0; j < n; ++j) exact += double(k(pts[i], pts[j])) * double(x(j, v));
      num += (double(y(i, v)) - exact) * (double(y(i, v)) - exact);
      den += exact * exact;
    }
  }
  return std::sqrt(num / den);
}

struct hgemv_row {
  std::string problem;
  int n, nv;
  double build_s, time_s, error, bytes, peer_s;
};

inline void print_hgemv_header(double bandwidth_gbs, const char* what) {
  std::printf("\nBandwidth ceiling: %.0f GB/s (%s)\n\n", bandwidth_gbs, what);
  std::printf("| %-34s | %8s | %3s | %9s | %10s | %8s | %8s | %7s | %7s | %9s | %8s | %8s | %8s |\n", "problem", "n",
              "nv", "build (s)", "HGEMV (ms)", "ns/point", "GB/s", "of bw", "GFLOP/s", "H2 MB", "dense/H2", "error",
              "vs dense");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(10, '-').c_str(),
              std::string(5, '-').c_str(), std::string(11, '-').c_str(), std::string(12, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(9, '-').c_str(),
              std::string(9, '-').c_str(), std::string(11, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str());
}

// Bytes read per product: the H2 data once per pass. Flops: 2 per stored entry per vector.
inline void print_hgemv_row(const std::string& problem, double n, int nv, double build_s, double t, double bytes,
                            double elem_size, double error, double bandwidth_gbs, double dense_t) {
  const double gbs = bytes / t * 1e-9, gflops = 2.0 * nv * (bytes / elem_size) / t * 1e-9;
  const double dense_ratio = n * n * elem_size / bytes;
  char speedup[32] = "-";
  if (dense_t > 0) std::snprintf(speedup, sizeof speedup, "%.1fx", dense_t / t);
  std::printf("| %-34s | %8.0f | %3d | %9.2f | %10.3f | %8.2f | %8.1f | %6.1f%% | %7.1f | %9.1f | %8.1f | %8.1e | %8s |\n",
              problem.c_str(), n, nv, build_s, t * 1e3, t / n * 1e9, gbs, 100 * gbs / bandwidth_gbs, gflops,
              bytes * 1e-6, dense_ratio, error, speedup);
  std::fflush(stdout);
}

// Where the time goes, per phase (synchronized between phases, so the sum exceeds the plain time).
template <class T, class Space>
void print_phases(const h2_matrix<T, Space>& A, const matrix<T, Space>& X) {
  auto Y = matrix<T, Space>::uninitialized(A.rows(), X.cols(), A.data().ctx);
  detail::hgemv_phases p, warm;
  detail::hgemv(A.data(), detail::op::none, X.view(), Y.view(), &warm);
  for (int r = 0; r < 3; ++r) detail::hgemv(A.data(), detail::op::none, X.view(), Y.view(), &p);
  const double s = 1e3 / 3;
  std::printf("|   phases (ms), nv = %-3d: gather %.3f, upsweep %.3f, coupling %.3f, downsweep %.3f, leaves %.3f, "
              "dense %.3f, scatter %.3f\n", int(X.cols()), p.gather * s, p.upsweep * s, p.coupling * s, p.downsweep * s,
              p.leaves * s, p.dense * s, p.scatter * s);
}

template <class T, class Space, int D, class Kernel>
void hgemv_problem_rows(const std::string& name, const point_cloud<T, D>& pts, const Kernel& k, build_options bo,
                        std::vector<int> nvs, double bandwidth_gbs, int error_samples, bool phases) {
  auto ctx = default_context<Space>();
  auto t0 = std::chrono::steady_clock::now();
  auto A = h2_matrix<T, Space>::from_kernel(pts, k, bo, ctx);
  ctx->synchronize();
  const double build_s = seconds_since(t0);
  // The dense product of the same size, where the dense matrix fits (its time does not depend on the
  // entries, so a random matrix stands in for the kernel matrix).
  const index n = A.rows(), dense_limit = std::is_same_v<Space, host> ? index(1) << 14 : index(1) << 16;
  matrix<T, Space> M;
  if (n <= dense_limit) M = matrix<T, Space>::random(n, n, 3, ctx);
  for (int nv : nvs) {
    auto X = matrix<T, Space>::uniform(A.cols(), nv, 11, ctx);
    matrix<T, Space> Y;
    const double t = best_seconds(*ctx, [&] { Y = A * X; }, 5);
    double err = -1;
    if (error_samples > 0) err = sampled_error(pts, k, to_dense(X), to_dense(Y), error_samples);
    double dense_t = -1;
    if (M.size()) {
      auto Yd = matrix<T, Space>::uninitialized(n, nv, ctx);
      dense_t = best_seconds(*ctx, [&] {
        detail::gemm_strided_batched(*ctx, detail::op::none, detail::op::none, int(n), nv, int(n), T(1), M.data(), int(n),
                                     0, X.data(), int(n), 0, T(0), Yd.data(), int(n), 0, 1);
      }, 3);
    }
    print_hgemv_row(name, double(A.rows()), nv, build_s, t, double(A.memory_bytes()), sizeof(T), err, bandwidth_gbs,
                    dense_t);
    if (phases) print_phases(A, X);
  }
}

template <class T, class Space, int D, class Kernel>
void hgemv_problem(const std::string& name, const point_cloud<T, D>& pts, const Kernel& k, build_options bo,
                   std::vector<int> nvs, double bandwidth_gbs, int error_samples, bool phases = false) {
  try {
    hgemv_problem_rows<T, Space>(name, pts, k, bo, nvs, bandwidth_gbs, error_samples, phases);
  } catch (const device_out_of_memory&) {
    std::printf("| %-34s | %8zu | out of device memory: skipped\n", name.c_str(), std::size_t(pts.size()));
  }
}

// The reference problems of TARGETS.md, then the sweep up to 2^max_log_n points.
template <class Space>
void run_hgemv_benchmarks(double bw, const char* bw_label, int max_log_n) {
  std::printf("\n## Reference problems (TARGETS.md); peer (H2Opus CPU, 2 cores). AMD EPYC: 2D build 1.38-1.49 s,\n"
              "## HGEMV 0.035-0.044 s (1 vector), 0.102 s (16), error 2.5e-5; 3D build 2.25-2.34 s, HGEMV 0.066 s (1),\n"
              "## 0.178 s (16), error 3.2e-4. Intel Xeon (AVX-512): HGEMV 1 / 16 / 64 vectors 2D 0.042 / 0.090 / 0.257 s,\n"
              "## 3D 0.067 / 0.146 / 0.394 s. Error: relative, over 1%% of the rows, against exact sums.\n");
  print_hgemv_header(bw, bw_label);
  hgemv_problem<double, Space>("TARGETS 2D exp l=0.1 p=8", point_cloud<double, 2>::grid({256, 256}),
                               kernels::exponential{0.1}, {.leaf_size = 64, .eta = 1.0, .cheb_points = 8}, {1, 16, 64},
                               bw, 655, true);
  hgemv_problem<double, Space>("TARGETS 3D exp l=0.2 p=4", point_cloud<double, 3>::grid({40, 40, 40}),
                               kernels::exponential{0.2}, {.leaf_size = 64, .eta = 1.0, .cheb_points = 4}, {1, 16, 64},
                               bw, 640, true);
  std::printf("\n## Sweep: leaf 64, eta 0.9; error on 64 sampled rows\n");
  print_hgemv_header(bw, bw_label);
  for (int logn = 14; logn <= max_log_n; logn += 2) {
    const int g2 = 1 << (logn / 2);
    auto p2 = point_cloud<double, 2>::grid({g2, g2}, 0.1, 1);
    hgemv_problem<double, Space>("2D exp l=0.1 p=8", p2, kernels::exponential{0.1}, {.leaf_size = 64, .cheb_points = 8},
                                 {1, 16, 64}, bw, 64);
    hgemv_problem<double, Space>("2D gauss l=0.1 p=8", p2, kernels::gaussian{0.1}, {.leaf_size = 64, .cheb_points = 8},
                                 {1, 16}, bw, 64);
    const int g3 = int(std::lround(std::cbrt(double(1 << logn))));
    auto p3 = point_cloud<double, 3>::grid({g3, g3, g3}, 0.1, 1);
    hgemv_problem<double, Space>("3D exp l=0.2 p=4", p3, kernels::exponential{0.2}, {.leaf_size = 64, .cheb_points = 4},
                                 {1, 16, 64}, bw, 64);
  }
}

}  // namespace h2expr::bench
