// The solvers suite (diagonal operands, inverse, cg, gmres) on the cuda space, for the scalar type this
// object is built for (CMakeLists.txt compiles it once per type).
#include "solvers_tests.hpp"

namespace h2expr::test {
H2EXPR_TYPED_SUITE(solvers_test, cuda);
}  // namespace h2expr::test
