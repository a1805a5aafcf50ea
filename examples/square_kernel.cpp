// hara(A * A, 1e-4) of a kernel matrix, on the host space. Usage: square_kernel [grid] [tol]
#include <cstdlib>

#include "square_kernel.hpp"

int main(int argc, char** argv) {
  try {
    return square_kernel<h2expr::host>("host", argc > 1 ? std::atoi(argv[1]) : 64, argc > 2 ? std::atof(argv[2]) : 1e-4);
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
