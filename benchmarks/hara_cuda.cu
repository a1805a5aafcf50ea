// HARA on the CUDA space (see hara.hpp). Usage: bench_hara_cuda [max log2 n of the sweep] [reference, dims,
// tolerance, verbose: as bench_hara_host]
#include <cstdlib>

#include "hara.hpp"

int main(int argc, char** argv) {
  if (!h2expr::cuda_available()) {
    std::printf("no CUDA device\n");
    return 0;
  }
  std::printf("# h2expr HARA, CUDA space, double\n");
  h2expr::bench::run_hara_benchmarks<h2expr::cuda>(argc > 1 ? std::atoi(argv[1]) : 18,
                                                   argc > 2 ? std::atoi(argv[2]) : 1,
                                                   argc > 3 ? std::atoi(argv[3]) : 0, argc > 4 ? std::atof(argv[4]) : 1e-4,
                                                   argc > 5 && std::string(argv[5]) == "verbose");
}
