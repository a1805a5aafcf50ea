#pragma once
// HARA benchmark, written once for every space (the HARA paper's section 4): self-reconstruction and
// A * A of 2D and 3D covariance matrices. TARGETS.md's 2D reference problem first, beside the peer's
// figures, with its per-level table (samples, ranks, time), then a sweep over n and tolerances.
// Errors from 10 probes: err F = relative_error's sqrt(sum ||(P - M) x_i||^2 / sum ||M x_i||^2)
// (~ ||P - M||_F / ||M||_F, the norm the tolerance is in) and err max = max_i ||(P - M) x_i|| / ||M x_i||
// (the larger, the more a few singular values dominate M).
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace h2expr::bench {

inline void hara_header() {
  std::printf("| %-30s | %7s | %5s | %6s | %7s | %8s | %8s | %7s | %7s | %7s | %8s | %8s | %7s | %s |\n", "problem", "n",
              "tol", "op", "samples", "time (s)", "sampling", "ARA", "update", "recomp", "err F", "err max", "MB",
              "ranks per level");
  std::printf("|--------------------------------|---------|-------|--------|---------|----------|----------|---------|"
              "---------|---------|----------|----------|---------|-----|\n");
}

template <class T, class Space, int D, class Kernel>
void hara_problem(const std::string& name, const point_cloud<T, D>& pts, const Kernel& k, build_options bo,
                  double tol, bool square, bool per_level) {
  try {
    auto A = h2_matrix<T, Space>::from_kernel(pts, k, bo);
    hara_report rep;
    h2_matrix<T, Space> P;
    detail::probe_errors err;
    if (square) {
      P = hara(A * A, tol, {.block_size = 32, .converge_samples = 10, .report = &rep});
      err = detail::probe(as_sampler(P), as_sampler(A * A), 10, 99);
    } else {
      P = hara(A, tol, {.block_size = 32, .converge_samples = 10, .report = &rep});
      err = detail::probe(as_sampler(P), as_sampler(A), 10, 99);
    }
    std::string ranks;
    for (int r : P.ranks()) ranks += std::to_string(r) + " ";
    std::printf(
        "| %-30s | %7zu | %5.0e | %6s | %7d | %8.2f | %8.2f | %7.2f | %7.2f | %7.2f | %8.1e | %8.1e | %7.1f | %s|\n",
        name.c_str(), std::size_t(pts.size()), tol, square ? "A * A" : "A", rep.samples, rep.seconds,
        rep.seconds_sampling, rep.seconds_ara, rep.seconds_update, rep.seconds_compress, err.frobenius, err.max_ratio,
        P.memory_bytes() * 1e-6, ranks.c_str());
    if (per_level) {
      std::printf("|   per level: level, blocks, samples, ARA rank min/avg/max, seconds (sampling, ARA, update, "
                  "recompression)\n");
      for (const auto& l : rep.levels)
        std::printf("|     %2d %5d %6d  %4d %6.1f %4d   %7.3f %7.3f %7.3f %7.3f\n", l.level, l.blocks, l.samples,
                    l.rank_min, l.rank_avg, l.rank_max, l.seconds_sampling, l.seconds_ara, l.seconds_update,
                    l.seconds_compress);
    }
  } catch (const device_out_of_memory&) {
    std::printf("| %-30s | %7zu | out of device memory: skipped\n", name.c_str(), std::size_t(pts.size()));
  } catch (const rank_cap_reached& e) {
    std::printf("| %-30s | %7zu | %s\n", name.c_str(), std::size_t(pts.size()), e.what());
  }
  std::fflush(stdout);
}

// max_log_n: the sweep's largest n = 2^max_log_n; reference: whether to run TARGETS.md's problem.
template <class Space>
void run_hara_benchmarks(int max_log_n, bool reference) {
  if (reference) {
    std::printf("\n## Reference problem (TARGETS.md): 2D exp(-r/0.1), 256 x 256 grid, leaf 64, eta 1, Chebyshev 8.\n"
                "## Peer (H2Opus CPU, 2 cores, bs 32, r 10): rebuilding A at 1e-4 51.8 s, 2,187 samples, error 2.9e-4;\n"
                "## A * A at 1e-4 14.1 s, 954 samples, error 7.7e-5.\n\n");
    hara_header();
    const build_options bo{.leaf_size = 64, .eta = 1.0, .cheb_points = 8};
    hara_problem<double, Space>("TARGETS 2D exp l=0.1", point_cloud<double, 2>::grid({256, 256}),
                                kernels::exponential{0.1}, bo, 1e-4, false, true);
    hara_problem<double, Space>("TARGETS 2D exp l=0.1", point_cloud<double, 2>::grid({256, 256}),
                                kernels::exponential{0.1}, bo, 1e-4, true, true);
  }
  std::printf("\n## Sweep (eta 0.9, leaf 64; 2D Chebyshev 8, 3D Chebyshev 4): samples and time against n and tol\n\n");
  hara_header();
  for (int logn = 12; logn <= max_log_n; logn += 2) {
    const int g2 = 1 << (logn / 2);
    const int g3 = int(std::lround(std::cbrt(double(1 << logn))));
    for (double tol : {1e-2, 1e-4, 1e-6})
      for (bool square : {false, true}) {
        hara_problem<double, Space>("2D exp l=0.1", point_cloud<double, 2>::grid({g2, g2}, 0.1, 1),
                                    kernels::exponential{0.1}, {.leaf_size = 64, .cheb_points = 8}, tol, square, false);
        hara_problem<double, Space>("3D exp l=0.2", point_cloud<double, 3>::grid({g3, g3, g3}, 0.1, 1),
                                    kernels::exponential{0.2}, {.leaf_size = 64, .cheb_points = 4}, tol, square, false);
      }
  }
}

}  // namespace h2expr::bench
