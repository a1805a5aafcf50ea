// HGEMV on the CUDA space. Ceiling: a 2 GB device-to-device copy (bytes read + written), measured in
// this run; the H100 SXM datasheet peak (3.35 TB/s) is printed beside it.
#include <cstdlib>

#include "hgemv.hpp"

namespace hx = h2expr;

double copy_gbs(hx::context<hx::cuda>& ctx) {
  const std::size_t bytes = std::size_t(1) << 30;
  hx::detail::buffer<char, hx::cuda> a(hx::default_context<hx::cuda>(), bytes), b(hx::default_context<hx::cuda>(), bytes);
  H2EXPR_CUDA(cudaMemsetAsync(a.data(), 1, bytes, ctx.stream()));
  const double t = hx::bench::best_seconds(ctx, [&] {
    H2EXPR_CUDA(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
  }, 10);
  return 2.0 * bytes / t * 1e-9;
}

int main(int argc, char** argv) {
  if (!hx::cuda_available()) {
    std::printf("no CUDA device here: nothing to measure\n");
    return 0;
  }
  const int max_log_n = argc > 1 ? std::atoi(argv[1]) : 20;
  auto ctx = hx::default_context<hx::cuda>();
  const double bw = copy_gbs(*ctx);
  std::printf("# h2expr HGEMV, CUDA space: %s, double\n", ctx->properties().name);
  hx::bench::run_hgemv_benchmarks<hx::cuda>(bw, "device-to-device copy, measured; datasheet 3350 GB/s", max_log_n);
}
