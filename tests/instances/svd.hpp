#pragma once
// Instances of the batched SVDs (on the host Eigen's divide-and-conquer and Jacobi SVDs and the Gram
// eigensolver in double for every scalar type: the single costliest compile of the library).
#include <h2expr/detail/batched.hpp>

#include "instances/spaces.hpp"

#define H2EXPR_SVD_INSTANCES(kind, T, S) \
  kind void h2expr::detail::svd_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*, const int*,  \
                                            T* const*, T* const*, const int*, int, int, int);                      \
  kind void h2expr::detail::svd_right_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*,        \
                                                  const int*, T* const*, T* const*, const int*, int, int, int,     \
                                                  double);

namespace h2expr::detail {
H2EXPR_INSTANCES(H2EXPR_SVD_INSTANCES, extern template)
}  // namespace h2expr::detail
