// HGEMV on the host space. Ceiling: the read bandwidth of a sum over a 1 GB array on all OpenMP
// threads, measured in this run (HGEMV reads its data; a STREAM triad would also pay write-allocate
// traffic that its byte count leaves out, and so understates what reading alone reaches).
#include <cstdlib>

#include "hgemv.hpp"

namespace hx = h2expr;

double read_gbs() {
  const std::size_t n = std::size_t(128) << 20;  // 128 Mi doubles = 1 GB
  std::vector<double> a(n, 1.0);
  double sink = 0;
  hx::context<hx::host> ctx;
  const double t = hx::bench::best_seconds(ctx, [&] {
    double s = 0;
    // Eight independent running sums: one would measure the adder's latency, not memory.
#pragma omp parallel reduction(+ : s)
    {
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; i += 8)
        for (int u = 0; u < 8; ++u) acc[u] += a[i + u];
      for (double v : acc) s += v;
    }
    sink += s;
  }, 5);
  if (sink < 0) std::printf("%f", sink);  // keeps the sum from being optimized away
  return double(n) * sizeof(double) / t * 1e-9;
}

int main(int argc, char** argv) {
  const int max_log_n = argc > 1 ? std::atoi(argv[1]) : 18;
  const double bw = read_gbs();
  std::printf("# h2expr HGEMV, host space, %d OpenMP threads, double\n", hx::context<hx::host>::threads());
  std::printf("\n## Reference problems (TARGETS.md); peer (H2Opus CPU, same machine class): 2D build 1.38-1.49 s,\n"
              "## HGEMV 0.035-0.044 s (1 vector), 0.102 s (16), error 2.5e-5; 3D build 2.25-2.34 s, HGEMV 0.066 s\n"
              "## (1), 0.178 s (16), error 3.2e-4. Error: relative, over 1%% of the rows, against exact sums.\n");
  hx::bench::print_hgemv_header(bw, "read bandwidth (sum over 1 GB), measured");
  {
    auto pts = hx::point_cloud<double, 2>::grid({256, 256});
    hx::bench::hgemv_problem<double, hx::host>("TARGETS 2D exp l=0.1 p=8", pts, hx::kernels::exponential{0.1},
                                               {.leaf_size = 64, .eta = 1.0, .cheb_points = 8}, {1, 16}, bw, 655, true);
  }
  {
    auto pts = hx::point_cloud<double, 3>::grid({40, 40, 40});
    hx::bench::hgemv_problem<double, hx::host>("TARGETS 3D exp l=0.2 p=4", pts, hx::kernels::exponential{0.2},
                                               {.leaf_size = 64, .eta = 1.0, .cheb_points = 4}, {1, 16}, bw, 640, true);
  }
  std::printf("\n## Sweep: leaf 64, eta 0.9; error on 64 sampled rows\n");
  hx::bench::print_hgemv_header(bw, "read bandwidth (sum over 1 GB), measured");
  for (int logn = 14; logn <= max_log_n; logn += 2) {
    const int g2 = 1 << (logn / 2);
    auto p2 = hx::point_cloud<double, 2>::grid({g2, g2}, 0.1, 1);
    hx::bench::hgemv_problem<double, hx::host>("2D exp l=0.1 p=8", p2, hx::kernels::exponential{0.1},
                                               {.leaf_size = 64, .cheb_points = 8}, {1, 16, 64}, bw, 64);
    hx::bench::hgemv_problem<double, hx::host>("2D gauss l=0.1 p=8", p2, hx::kernels::gaussian{0.1},
                                               {.leaf_size = 64, .cheb_points = 8}, {1, 16}, bw, 64);
    const int g3 = int(std::lround(std::cbrt(double(1 << logn))));
    auto p3 = hx::point_cloud<double, 3>::grid({g3, g3, g3}, 0.1, 1);
    hx::bench::hgemv_problem<double, hx::host>("3D exp l=0.2 p=4", p3, hx::kernels::exponential{0.2},
                                               {.leaf_size = 64, .cheb_points = 4}, {1, 16, 64}, bw, 64);
  }
}
