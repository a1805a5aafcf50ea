// HARA on the host space (see hara.hpp). Usage: bench_hara_host [max log2 n of the sweep]
// [reference: 0 none, 1 the structures, both constructions and problems of TARGETS.md, 2 their
// structures alone, 3 their problems alone, 4 a sweep over n at 1e-4 on the 2D problem's structure, 5 on the
// 3D one] [3: dims, 2, 3 or 0 for both] [3: tolerance, default 1e-4] [3: "verbose": hara's lines per level as it
// runs]
#include <cstdlib>

#include "hara.hpp"

int main(int argc, char** argv) {
  std::printf("# h2expr HARA, host space, %d OpenMP threads, double\n", h2expr::context<h2expr::host>::threads());
  h2expr::bench::run_hara_benchmarks<h2expr::host>(argc > 1 ? std::atoi(argv[1]) : 14,
                                                   argc > 2 ? std::atoi(argv[2]) : 1,
                                                   argc > 3 ? std::atoi(argv[3]) : 0, argc > 4 ? std::atof(argv[4]) : 1e-4,
                                                   argc > 5 && std::string(argv[5]) == "verbose");
}
