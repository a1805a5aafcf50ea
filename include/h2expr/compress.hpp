#pragma once
// compress(A, tol): H2 recompression to a tolerance, with its report.
// Defined in detail/h2expr/detail/operations/compress.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operations/compress.hpp>
