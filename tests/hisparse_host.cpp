// The HiSparse suite on the host space, for the scalar type this object is built for (CMakeLists.txt
// compiles it once per type).
#include "hisparse_tests.hpp"

namespace h2expr::test {
H2EXPR_TYPED_SUITE(hisparse_test, host);
}  // namespace h2expr::test
