// The h2_matrix suite on the cuda space, for the scalar type this object is built for (CMakeLists.txt
// compiles it once per type).
#include "h2_matrix_tests.hpp"

namespace h2expr::test {
H2EXPR_TYPED_SUITE(h2_matrix_test, cuda);
}  // namespace h2expr::test
