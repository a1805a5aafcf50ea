// The main demo on the CUDA space (larger grids); the host space where no GPU is present.
#include "kernel_matvec.hpp"
#include "square_kernel.hpp"

template <class Space>
int demo(const char* space_name, int matvec_grid, int square_grid) {
  std::printf("An H2 matrix:\n");
  const int matvec = kernel_matvec<Space>(space_name, matvec_grid);
  std::printf("\nIts square, from products alone:\n");
  const int square = square_kernel<Space>(space_name, square_grid, 1e-4, /*verbose=*/true);
  return matvec != 0 ? matvec : square;
}

int main() {
  try {
    if (!h2expr::cuda_available()) {
      std::printf("no CUDA device here: running the host space instead\n");
      return demo<h2expr::host>("host", 128, 128);
    }
    return demo<h2expr::cuda>("cuda", 512, 256);
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
