// Batched primitives on the host space. Ceiling: one 2048^3 Eigen gemm on all OpenMP threads,
// measured here (the best dense rate this machine reaches with the library h2expr uses per item).
#include <thread>

#include "batched.hpp"

template <class T>
double host_gemm_ceiling() {
  const int n = 2048;
  Eigen::Matrix<T, -1, -1> a = Eigen::Matrix<T, -1, -1>::Random(n, n), b = a, c(n, n);
  h2expr::context<h2expr::host> ctx;
  const double t = h2expr::bench::best_seconds(ctx, [&] { c.noalias() = a * b; }, 3);
  return 2.0 * n * n * n / t * 1e-9;
}

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;  // fraction of the default batch sizes
  auto ctx = h2expr::default_context<h2expr::host>();
  std::printf("# h2expr batched primitives, host space: %d OpenMP threads, %u hardware threads\n",
              h2expr::context<h2expr::host>::threads(), std::thread::hardware_concurrency());
  for (int precision = 0; precision < 2; ++precision) {
    const double ceiling = precision == 0 ? host_gemm_ceiling<double>() : host_gemm_ceiling<float>();
    std::printf("\n## %s: ceiling = %.1f GFLOP/s (2048^3 Eigen gemm, all threads, measured)\n\n",
                precision == 0 ? "double" : "float", ceiling);
    h2expr::bench::print_header();
    if (precision == 0) h2expr::bench::run_all<double>(ctx, ceiling, scale);
    else h2expr::bench::run_all<float>(ctx, ceiling, scale);
  }
  std::printf("\nThe reference problems of TARGETS.md are in bench_hgemv_host / bench_hgemv_cuda.\n");
}
