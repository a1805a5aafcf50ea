// The host SVDs for one scalar type (CMakeLists.txt compiles this once per type).
#include "instances/svd.hpp"

namespace h2expr::detail {
H2EXPR_SVD_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::host)
#ifdef H2EXPR_TEST_DOUBLE_HELPERS  // with double's objects, or float's when double is not built
template void gram_right_singular<double>(const dense<double>&, double, double, Eigen::VectorXd&, dense<double>&);
template bool reduced_right_singular<double>(const dense<double>&, double, Eigen::VectorXd&, dense<double>&);
#endif
}  // namespace h2expr::detail
