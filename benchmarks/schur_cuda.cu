// Schur complements of Poisson problems (the HARA paper's Table 1) on the CUDA space.
// Usage: bench_schur_cuda [2D grids, e.g. 256,512,1024,2048] [3D grids, e.g. 32,64]
#include "schur.hpp"

int main(int argc, char** argv) {
  try {
    auto ctx = h2expr::default_context<h2expr::cuda>();
    std::printf("# bench_schur_cuda: %s\n", ctx->properties().name);
  } catch (const h2expr::error& e) {
    std::printf("bench_schur_cuda: %s\n", e.what());
    return 0;
  }
  h2expr::bench::run_schur_benchmarks<h2expr::cuda>(h2expr::bench::parse_grids(argc > 1 ? argv[1] : nullptr, {256, 512, 1024, 2048}),
                                                    h2expr::bench::parse_grids(argc > 2 ? argv[2] : nullptr, {32, 64}));
}
