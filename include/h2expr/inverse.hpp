#pragma once
// inverse(op, tol): the H2 inverse by Newton-Schulz steps, each a hara().
// Defined in detail/h2expr/detail/operations/inverse.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operations/inverse.hpp>
