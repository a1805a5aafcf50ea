#pragma once
// sampler<T, Space>: an operator known only through its products with blocks of vectors.
// Defined in detail/h2expr/detail/randomized/sampler.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/randomized/sampler.hpp>
