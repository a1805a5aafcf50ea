// The batched primitives on the CUDA space; falls back to the host space where no GPU is present.
#include "batched_primitives.hpp"

int main() {
  try {
    if (!h2expr::cuda_available()) {
      std::printf("no CUDA device here: running the host space instead\n");
      return run_demo<h2expr::host>("host");
    }
    return run_demo<h2expr::cuda>("cuda");
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
