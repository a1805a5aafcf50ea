// The expression suite on the cuda space, for the scalar type this object is built for (CMakeLists.txt
// compiles it once per type).
#include "expression_tests.hpp"

namespace h2expr::test {
H2EXPR_TYPED_SUITE(expression_test, cuda);
}  // namespace h2expr::test
