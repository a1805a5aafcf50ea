#include "expression_tests.hpp"

namespace h2expr::test {
using host_configs = ::testing::Types<config<float, host>, config<double, host>>;
INSTANTIATE_TYPED_TEST_SUITE_P(host, expression_test, host_configs);
}  // namespace h2expr::test
