// Batched ARA of kernel interaction blocks, on the CUDA space (the same code as the host example).
#include "low_rank_batch.hpp"

int main() {
  if (!h2expr::cuda_available()) {
    std::printf("no CUDA device here: nothing to run\n");
    return 0;
  }
  try {
    return run_low_rank_batch<h2expr::cuda>("CUDA");
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
