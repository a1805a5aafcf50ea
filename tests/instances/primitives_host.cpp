// The host primitives for one scalar type (CMakeLists.txt compiles this once per type).
#include "instances/primitives.hpp"

namespace h2expr::detail {
H2EXPR_PRIMITIVES_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::host)
}  // namespace h2expr::detail
