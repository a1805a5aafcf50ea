// Gaussian-process regression, the H2 inverse as CG's preconditioner, on the host space.
// Usage: gaussian_process [grid] [tol]
#include <cstdlib>

#include "gaussian_process.hpp"

int main(int argc, char** argv) {
  try {
    return gaussian_process<h2expr::host>("host", argc > 1 ? std::atoi(argv[1]) : 64, argc > 2 ? std::atof(argv[2]) : 1e-8);
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
