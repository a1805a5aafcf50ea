// The CUDA primitives for one scalar type (CMakeLists.txt compiles this once per type): every kernel of
// the CUDA backend that the C++ translation units of the CUDA space call (the CUDA suites' drivers, the
// algorithms' CUDA instances: tests/CMakeLists.txt).
#include "instances/primitives.hpp"

namespace h2expr::detail {
H2EXPR_PRIMITIVES_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::cuda)
H2EXPR_CUDA_BACKEND_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::cuda)
#ifdef H2EXPR_TEST_SCALAR_IS_DOUBLE
H2EXPR_CUDA_INDEX_INSTANCES(template)
#endif
}  // namespace h2expr::detail
