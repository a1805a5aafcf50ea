// Schur complements of Poisson problems (the HARA paper's Table 1) on the host space.
// Usage: bench_schur_host [2D grids, e.g. 256,512,1024] [3D grids, e.g. 32]
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
  std::printf("# bench_schur_host: h2expr host space\n");
  h2expr::bench::run_schur_benchmarks<h2expr::host>(grids(argc > 1 ? argv[1] : nullptr, {256, 512, 1024}),
                                                    grids(argc > 2 ? argv[2] : nullptr, {16, 32}));
}
