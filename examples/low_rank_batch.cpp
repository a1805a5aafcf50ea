// Batched ARA of kernel interaction blocks, on the host space.
#include "low_rank_batch.hpp"

int main() {
  try {
    return run_low_rank_batch<h2expr::host>("host");
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
