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
  hx::bench::run_hgemv_benchmarks<hx::host>(bw, "read bandwidth (sum over 1 GB), measured", max_log_n);
}
