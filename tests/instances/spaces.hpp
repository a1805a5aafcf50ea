#pragma once
// Explicit instantiations for the tests: each heavy algorithm is compiled once per (scalar, space) in
// a library of tests/instances/, and every test translation unit sees only `extern template`
// declarations of it (the library stays header-only for its users; this is a build-time saving of the
// project's own tests). A header of this folder names its instances once, as a list
// `H2EXPR_X_INSTANCES(kind, T, S)`; `kind` is `extern template` in the header and `template` in the
// library's translation unit of that space.
//
// H2EXPR_INSTANCES(list, kind): the list for every (scalar, space) this translation unit can compile
// (the CUDA space where this translation unit can use it: H2EXPR_CUDA_SPACE).
#include <h2expr/space.hpp>

#define H2EXPR_HOST_INSTANCES(list, kind) list(kind, float, ::h2expr::host) list(kind, double, ::h2expr::host)
#define H2EXPR_CUDA_INSTANCES(list, kind) list(kind, float, ::h2expr::cuda) list(kind, double, ::h2expr::cuda)
#ifdef H2EXPR_CUDA_SPACE
#define H2EXPR_INSTANCES(list, kind) H2EXPR_HOST_INSTANCES(list, kind) H2EXPR_CUDA_INSTANCES(list, kind)
#else
#define H2EXPR_INSTANCES(list, kind) H2EXPR_HOST_INSTANCES(list, kind)
#endif
