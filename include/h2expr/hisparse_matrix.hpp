#pragma once
// hisparse_matrix<T, Space>: a sparse matrix in the hierarchical HiSparse format (one copy serves H X
// and H^T X; transposition and scale are state), an operand of expressions like sparse_matrix.
// Defined in detail/h2expr/detail/operands/hisparse_matrix.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operands/hisparse_matrix.hpp>
