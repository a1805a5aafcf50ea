#pragma once
// matrix<T, Space>: a column-major dense block of vectors in a space.
// Defined in detail/h2expr/detail/operands/matrix.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operands/matrix.hpp>
