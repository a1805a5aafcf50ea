#pragma once
// batched_sampler: a batch of independent operators sampled together (batched ARA).
// Defined in detail/h2expr/detail/randomized/batched_sampler.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/randomized/batched_sampler.hpp>
