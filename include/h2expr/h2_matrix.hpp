#pragma once
// h2_matrix<T, Space>: an H2 matrix, built from a kernel, multiplied, saved and loaded.
// Defined in detail/h2expr/detail/h2/h2_matrix.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/h2/h2_matrix.hpp>
