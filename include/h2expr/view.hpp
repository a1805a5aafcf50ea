#pragma once
// view / const_view: non-owning column-major blocks in a space's memory.
// Defined in detail/h2expr/detail/core/view.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/core/view.hpp>
