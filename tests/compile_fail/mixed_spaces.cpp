// Must not compile: an expression over operands of two spaces (checked by tests/CMakeLists.txt).
#include <h2expr/h2expr.hpp>

void mix(const h2expr::h2_matrix<double, h2expr::host>& a, const h2expr::h2_matrix<double, h2expr::cuda>& b) {
  auto e = a + 2.0 * b;
  (void)e;
}
int main() {}
