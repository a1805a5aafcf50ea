#pragma once
// The execution spaces: h2expr::host, and h2expr::cuda where a translation unit can use it.
// Defined in detail/h2expr/detail/core/space.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/core/space.hpp>
