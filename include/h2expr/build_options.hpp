#pragma once
// build_options: how a structure is built from points and an h2_matrix from a kernel.
// Defined in detail/h2expr/detail/structure/build_options.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/structure/build_options.hpp>
