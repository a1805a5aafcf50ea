// The H2 inverse and preconditioned CG on Gaussian-process systems, host space (see inverse.hpp).
// Usage: bench_inverse_host [what: 0 everything, 1 2D Matern sweep, 2 2D exponential, 3 3D, 4 3D Matern, 5 3D exponential]
//                           [max log2 n (default 16)] [min log2 n (default 12)]
//                           [the inverse's tolerances: 0 (default) 1e-2 and 1e-4; 1: 1e-2 only; or a list, 0.1,1e-2]
//                           [1: the inverse's line per step on stderr, as it runs]
//                           [0: no solves on a block of 16 right-hand sides (at n = 2^17 they take a quarter hour)]
#include <h2expr/context.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "inverse.hpp"

int main(int argc, char** argv) {
  namespace hx = h2expr;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a run cut by a time limit keeps every finished line
  const int what = argc > 1 ? std::atoi(argv[1]) : 0, hi = argc > 2 ? std::atoi(argv[2]) : 16,
            lo = argc > 3 ? std::atoi(argv[3]) : 12;
  std::printf("# h2expr inverse and preconditioned CG, host space, %d OpenMP threads, double\n",
              hx::context<hx::host>::threads());
  std::vector<double> tols{1e-2, 1e-4};
  if (argc > 4 && std::string(argv[4]) == "1") tols = {1e-2};
  else if (argc > 4 && std::string(argv[4]) != "0") {  // a comma-separated list
    tols.clear();
    for (const char* p = argv[4]; *p;) {
      char* end = nullptr;
      tols.push_back(std::strtod(p, &end));
      if (end == p || !(tols.back() > 0 && tols.back() < 1)) {
        std::fprintf(stderr, "bench_inverse_host: bad tolerance list '%s'\n", argv[4]);
        return 2;
      }
      p = *end == ',' ? end + 1 : end;
    }
  }
  const bool verbose = argc > 5 && std::atoi(argv[5]) == 1, blocks = !(argc > 6 && std::atoi(argv[6]) == 0);
  for (int l = lo; l <= hi; ++l) {
    if (what == 0 || what == 1) hx::bench::gp_benchmark<hx::host, 2>("Matern 3/2, length 0.15", hx::kernels::matern{0.15}, l, tols, 14, verbose, blocks);
    if (what == 0 || what == 2) hx::bench::gp_benchmark<hx::host, 2>("exponential, length 0.1", hx::kernels::exponential{0.1}, l, tols, 14, verbose, blocks);
    if (what == 0 || what == 3 || what == 4) hx::bench::gp_benchmark<hx::host, 3>("Matern 3/2, length 0.15", hx::kernels::matern{0.15}, l, tols, 14, verbose, blocks);
    if (what == 0 || what == 3 || what == 5) hx::bench::gp_benchmark<hx::host, 3>("exponential, length 0.1", hx::kernels::exponential{0.1}, l, tols, 14, verbose, blocks);
  }
}
