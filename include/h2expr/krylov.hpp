#pragma once
// cg, gmres: Krylov solves with any expression as operator and preconditioner.
// Defined in detail/h2expr/detail/operations/krylov.hpp (the layers: README, "How the code is laid out").
#include <h2expr/detail/operations/krylov.hpp>
