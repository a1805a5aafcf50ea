// The main demo on the CUDA space (a larger grid); the host space where no GPU is present.
#include "kernel_matvec.hpp"

int main() {
  try {
    if (!h2expr::cuda_available()) {
      std::printf("no CUDA device here: running the host space instead\n");
      return kernel_matvec<h2expr::host>("host");
    }
    return kernel_matvec<h2expr::cuda>("cuda", 512);
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
