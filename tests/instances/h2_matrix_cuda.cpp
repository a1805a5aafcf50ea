// The h2_matrix instances of the CUDA space for one scalar type (CMakeLists.txt compiles this once per
// type: no compile holds both), compiled once for every test that uses them. C++: the kernels they
// launch are declared by detail/primitives/cuda/primitives.hpp and compiled in primitives_cuda.cu.
#include "instances/h2_matrix.hpp"

H2EXPR_H2_MATRIX_INSTANCES(template, H2EXPR_TEST_SCALAR, ::h2expr::cuda)
