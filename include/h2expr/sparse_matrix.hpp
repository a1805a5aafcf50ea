#pragma once
// sparse_matrix<T, Space>: an immutable CSR matrix, the sparse operand of expressions.
// Defined in detail/h2expr/detail/operands/sparse_matrix.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operands/sparse_matrix.hpp>
