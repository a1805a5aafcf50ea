#pragma once
// sparse_cholesky<T, Space> and cholesky(S): a sparse Cholesky factor, solve(F) in expressions.
// Defined in detail/h2expr/detail/operands/sparse_cholesky.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operands/sparse_cholesky.hpp>
