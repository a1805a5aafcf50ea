#pragma once
// context<Space>: the execution resources of a space; default_context<Space>().
// Defined in detail/h2expr/detail/core/context.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/core/context.hpp>
