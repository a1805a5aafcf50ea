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
  std::printf("\n## Reference problems (TARGETS.md); peer (H2Opus CPU, 2 cores): 2D build 1.38-1.49 s, HGEMV\n"
              "## 0.035-0.044 s (1 vector), 0.102 s (16), error 2.5e-5; 3D build 2.25-2.34 s, HGEMV 0.066 s (1),\n"
              "## 0.178 s (16), error 3.2e-4. Error: relative, over 1%% of the rows, against exact sums.\n");
  hx::bench::print_hgemv_header(bw, "device-to-device copy, measured; datasheet 3350 GB/s");
  {
    auto pts = hx::point_cloud<double, 2>::grid({256, 256});
    hx::bench::hgemv_problem<double, hx::cuda>("TARGETS 2D exp l=0.1 p=8", pts, hx::kernels::exponential{0.1},
                                               {.leaf_size = 64, .eta = 1.0, .cheb_points = 8}, {1, 16}, bw, 655, true);
  }
  {
    auto pts = hx::point_cloud<double, 3>::grid({40, 40, 40});
    hx::bench::hgemv_problem<double, hx::cuda>("TARGETS 3D exp l=0.2 p=4", pts, hx::kernels::exponential{0.2},
                                               {.leaf_size = 64, .eta = 1.0, .cheb_points = 4}, {1, 16}, bw, 640, true);
  }
  std::printf("\n## Sweep: leaf 64, eta 0.9; error on 64 sampled rows\n");
  hx::bench::print_hgemv_header(bw, "device-to-device copy, measured; datasheet 3350 GB/s");
  for (int logn = 14; logn <= max_log_n; logn += 2) {
    const int g2 = 1 << (logn / 2);
    auto p2 = hx::point_cloud<double, 2>::grid({g2, g2}, 0.1, 1);
    hx::bench::hgemv_problem<double, hx::cuda>("2D exp l=0.1 p=8", p2, hx::kernels::exponential{0.1},
                                               {.leaf_size = 64, .cheb_points = 8}, {1, 16, 64}, bw, 64);
    hx::bench::hgemv_problem<double, hx::cuda>("2D gauss l=0.1 p=8", p2, hx::kernels::gaussian{0.1},
                                               {.leaf_size = 64, .cheb_points = 8}, {1, 16}, bw, 64);
    const int g3 = int(std::lround(std::cbrt(double(1 << logn))));
    auto p3 = hx::point_cloud<double, 3>::grid({g3, g3, g3}, 0.1, 1);
    hx::bench::hgemv_problem<double, hx::cuda>("3D exp l=0.2 p=4", p3, hx::kernels::exponential{0.2},
                                               {.leaf_size = 64, .cheb_points = 4}, {1, 16, 64}, bw, 64);
  }
}
