// The main demo: an H2 kernel matrix times a block of vectors, on the host space (any machine).
#include "kernel_matvec.hpp"

int main() {
  try {
    return kernel_matvec<h2expr::host>("host");
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
