// Compression on the CUDA space (see compress.hpp).
#include <cstdlib>

#include "compress.hpp"

int main(int argc, char** argv) {
  if (!h2expr::cuda_available()) {
    std::printf("no CUDA device here: nothing to measure\n");
    return 0;
  }
  std::printf("# h2expr compression, CUDA space: %s, double\n",
              h2expr::default_context<h2expr::cuda>()->properties().name);
  h2expr::bench::run_compress_benchmarks<h2expr::cuda>(argc > 1 ? std::atoi(argv[1]) : 18);
}
