#include "expression_tests.hpp"

namespace h2expr::test {
using cuda_configs = ::testing::Types<config<float, cuda>, config<double, cuda>>;
INSTANTIATE_TYPED_TEST_SUITE_P(cuda, expression_test, cuda_configs);
}  // namespace h2expr::test
