// Batched primitives on the CUDA space. Ceiling: one 8192^3 cuBLAS gemm on the same device, measured
// here (the dense rate the batched kernels are compared with); the datasheet peak is printed too.
#include "batched.hpp"

template <class T>
double cublas_ceiling(h2expr::context<h2expr::cuda>& ctx) {
  const int n = 8192;
  h2expr::detail::buffer<T, h2expr::cuda> a(h2expr::default_context<h2expr::cuda>(), std::size_t(n) * n),
      c(h2expr::default_context<h2expr::cuda>(), std::size_t(n) * n);
  h2expr::detail::fill_random(ctx, h2expr::detail::distribution::normal, n, n, a.data(), n, 1);
  const T one = 1, zero = 0;
  const double t = h2expr::bench::best_seconds(ctx, [&] {
    if constexpr (sizeof(T) == 8)
      H2EXPR_CUBLAS(cublasDgemm(ctx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, a.data(), n, &zero,
                                c.data(), n));
    else
      H2EXPR_CUBLAS(cublasSgemm(ctx.blas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, a.data(), n, &zero,
                                c.data(), n));
  }, 3);
  return 2.0 * n * n * n / t * 1e-9;
}

int main(int argc, char** argv) {
  if (!h2expr::cuda_available()) {
    std::printf("no CUDA device here: nothing to measure\n");
    return 0;
  }
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  auto ctx = h2expr::default_context<h2expr::cuda>();
  const auto& p = ctx->properties();
  std::printf("# h2expr batched primitives, CUDA space: %s, %d SMs, compute capability %d.%d\n", p.name,
              p.multiProcessorCount, p.major, p.minor);
  for (int precision = 0; precision < 2; ++precision) {
    const double ceiling = precision == 0 ? cublas_ceiling<double>(*ctx) : cublas_ceiling<float>(*ctx);
    std::printf("\n## %s: ceiling = %.1f GFLOP/s (8192^3 cuBLAS gemm, measured; H100 SXM datasheet: %s)\n\n",
                precision == 0 ? "double" : "float", ceiling,
                precision == 0 ? "67 TFLOP/s FP64 tensor core" : "67 TFLOP/s FP32");
    h2expr::bench::print_header();
    if (precision == 0) h2expr::bench::run_all<double>(ctx, ceiling, scale);
    else h2expr::bench::run_all<float>(ctx, ceiling, scale);
  }
}
