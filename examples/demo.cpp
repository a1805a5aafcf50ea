// The main demo: runs on the host space, on any machine.
#include "demo.hpp"

int main() {
  try {
    return run_demo<h2expr::host>("host");
  } catch (const h2expr::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
