// The HiSparse suite on the cuda space, for the scalar type this object is built for (CMakeLists.txt
// compiles it once per type).
#include "hisparse_tests.hpp"

namespace h2expr::test {
H2EXPR_TYPED_SUITE(hisparse_test, cuda);
}  // namespace h2expr::test
