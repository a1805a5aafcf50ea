#pragma once
// orthogonalize(A): orthonormal basis trees, in place.
// Defined in detail/h2expr/detail/operations/orthogonalize.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operations/orthogonalize.hpp>
