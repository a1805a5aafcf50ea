#pragma once
// h2expr::error and the exceptions derived from it: every failure h2expr reports.
// Defined in detail/h2expr/detail/core/error.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/core/error.hpp>
