#pragma once
// E * X, as_sampler(E), to_dense(E): the evaluation of expressions.
// Defined in detail/h2expr/detail/expressions/evaluate.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/expressions/evaluate.hpp>
