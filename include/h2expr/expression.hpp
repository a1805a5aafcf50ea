#pragma once
// Lazy expressions over operators (sums, scalings, products, transposes, solves).
// Defined in detail/h2expr/detail/expressions/expression.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/expressions/expression.hpp>
