// Schur complement of a 2D or 3D Poisson problem, on the CUDA space.
// Usage: schur_complement_cuda [grid n] [dimension 2|3] [tol] [off-diagonal blocks: csr (default) | hisparse]
#include <cstdlib>

#include "schur_complement.hpp"

int main(int argc, char** argv) {
  const int dim = argc > 2 ? std::atoi(argv[2]) : 2;
  const int n = argc > 1 ? std::atoi(argv[1]) : (dim == 2 ? 1024 : 32);
  const double tol = argc > 3 ? std::atof(argv[3]) : 1e-4;
  const std::string off_diagonal = argc > 4 ? argv[4] : "csr";
  try {
    return dim == 3 ? schur_complement<h2expr::cuda, 3>("cuda", n, tol, off_diagonal)
                    : schur_complement<h2expr::cuda, 2>("cuda", n, tol, off_diagonal);
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
