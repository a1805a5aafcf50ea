// The h2_matrix instances of the CUDA space for one scalar type (CMakeLists.txt compiles this once
// per type: no compile holds both), compiled once for every test that uses them.
#include "instances/h2_matrix.hpp"

H2EXPR_H2_MATRIX_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::cuda)
