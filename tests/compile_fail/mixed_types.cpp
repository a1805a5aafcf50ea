// Must not compile: an expression over operands of two value types (checked by tests/CMakeLists.txt).
#include <h2expr/h2expr.hpp>

void mix(const h2expr::h2_matrix<double>& a, const h2expr::sparse_matrix<float>& s) {
  auto e = a * s;
  (void)e;
}
int main() {}
