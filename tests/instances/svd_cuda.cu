// The CUDA SVDs for one scalar type (CMakeLists.txt compiles this once per type).
#include "instances/svd.hpp"

namespace h2expr::detail {
H2EXPR_SVD_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::cuda)
}  // namespace h2expr::detail
