// Schur complements of Poisson problems (the HARA paper's Table 1) on the host space.
// Usage: bench_schur_host [2D grids, e.g. 256,512,1024] [3D grids, e.g. 32]
#include "schur.hpp"

int main(int argc, char** argv) {
  std::printf("# bench_schur_host: h2expr host space\n");
  h2expr::bench::run_schur_benchmarks<h2expr::host>(h2expr::bench::parse_grids(argc > 1 ? argv[1] : nullptr, {256, 512, 1024}),
                                                    h2expr::bench::parse_grids(argc > 2 ? argv[2] : nullptr, {16, 32}));
}
