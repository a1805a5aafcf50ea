// hara(A + 2 * transpose(A) - A * A, 1e-4) on the CUDA space. Usage: expression_algebra_cuda [grid] [tol]
#include <cstdlib>

#include "expression_algebra.hpp"

int main(int argc, char** argv) {
  try {
    return expression_algebra<h2expr::cuda>("cuda", argc > 1 ? std::atoi(argv[1]) : 256,
                                            argc > 2 ? std::atof(argv[2]) : 1e-4);
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
