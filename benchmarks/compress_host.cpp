// Compression on the host space (see compress.hpp).
#include <cstdlib>

#include "compress.hpp"

int main(int argc, char** argv) {
  std::printf("# h2expr compression, host space, %d OpenMP threads, double\n", h2expr::context<h2expr::host>::threads());
  h2expr::bench::run_compress_benchmarks<h2expr::host>(argc > 1 ? std::atoi(argv[1]) : 16);
}
