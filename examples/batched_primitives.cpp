// The batched dense primitives under the H2 algorithms, on the host space.
#include "batched_primitives.hpp"

int main() {
  try {
    return run_demo<h2expr::host>("host");
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
