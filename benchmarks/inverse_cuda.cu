// The H2 inverse and preconditioned CG on Gaussian-process systems, CUDA space (see inverse.hpp).
// Usage: bench_inverse_cuda [max log2 n (default 18)] [min log2 n (default 14)]
#include <h2expr/context.hpp>

#include <cstdio>
#include <cstdlib>

#include "inverse.hpp"

int main(int argc, char** argv) {
  namespace hx = h2expr;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run cut by a time limit keeps every finished line
  const int hi = argc > 1 ? std::atoi(argv[1]) : 18, lo = argc > 2 ? std::atoi(argv[2]) : 14;
  std::printf("# h2expr inverse and preconditioned CG, CUDA space, double\n");
  if (!hx::cuda_available()) {
    std::printf("no CUDA device: nothing measured\n");
    return 0;
  }
  for (int l = lo; l <= hi; ++l)
    hx::bench::gp_benchmark<hx::cuda, 2>("Matern 3/2, length 0.15", hx::kernels::matern{0.15}, l, {1e-2, 1e-4}, 0);
}
