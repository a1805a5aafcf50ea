#pragma once
// Built-in kernels k(x, y) of a distance (exponential, gaussian, matern, inverse_distance).
// Defined in detail/h2expr/detail/primitives/kernels.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/primitives/kernels.hpp>
