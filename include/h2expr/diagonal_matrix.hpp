#pragma once
// diagonal_matrix<T, Space>: identity<T, Space>(n) and diagonal(d) as operands of expressions.
// Defined in detail/h2expr/detail/operands/diagonal_matrix.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operands/diagonal_matrix.hpp>
