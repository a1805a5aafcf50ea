#pragma once
// batched_ara(): the adaptive randomized range finder on a batch of operators.
// Defined in detail/h2expr/detail/operations/batched_ara.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operations/batched_ara.hpp>
