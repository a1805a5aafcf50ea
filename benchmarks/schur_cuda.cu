// Schur complements of Poisson problems (the HARA paper's Table 1) on the CUDA space.
// Usage: bench_schur_cuda [2D grids, e.g. 256,512,1024,2048] [3D grids, e.g. 32,64]
#include <cstdlib>
#include <sstream>

#include "schur.hpp"

static std::vector<int> grids(const char* arg, std::vector<int> fallback) {
  if (!arg) return fallback;
  std::vector<int> g;
  std::stringstream ss(arg);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty() && std::atoi(item.c_str()) > 0) g.push_back(std::atoi(item.c_str()));
  return g;
}

int main(int argc, char** argv) {
  try {
    auto ctx = h2expr::default_context<h2expr::cuda>();
    std::printf("# bench_schur_cuda: %s\n", ctx->properties().name);
  } catch (const h2expr::error& e) {
    std::printf("bench_schur_cuda: %s\n", e.what());
    return 0;
  }
  h2expr::bench::run_schur_benchmarks<h2expr::cuda>(grids(argc > 1 ? argv[1] : nullptr, {256, 512, 1024, 2048}),
                                                    grids(argc > 2 ? argv[2] : nullptr, {32, 64}));
}
