// The main demo, on the host space (any machine): an H2 kernel matrix (construction, HGEMV and
// compression), then the library's main job, a new H2 matrix from an expression: A squared, rebuilt
// from products by hara(A * A, 1e-4), with a line per level, its error, memory and time.
#include "kernel_matvec.hpp"
#include "square_kernel.hpp"

int main() {
  try {
    std::printf("An H2 matrix:\n");
    const int matvec = kernel_matvec<h2expr::host>("host");
    std::printf("\nIts square, from products alone:\n");
    const int square = square_kernel<h2expr::host>("host", 128, 1e-4, /*verbose=*/true);
    return matvec != 0 ? matvec : square;
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
