#pragma once
// hara(expression, tol): a new H2 matrix from products with an expression.
// Defined in detail/h2expr/detail/operations/hara.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operations/hara.hpp>
