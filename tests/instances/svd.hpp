#pragma once
// Instances of the batched SVDs (on the host Eigen's divide-and-conquer and Jacobi SVDs and the Gram
// eigensolver in double: the costliest compiles of the library).
#include <h2expr/detail/primitives/batched.hpp>

#include "instances/spaces.hpp"

#define H2EXPR_SVD_INSTANCES(kind, T, S) \
  kind void h2expr::detail::svd_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*, const int*,  \
                                            T* const*, T* const*, const int*, int, int, int);                      \
  kind void h2expr::detail::svd_right_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*,        \
                                                  const int*, T* const*, T* const*, const int*, int, int, int,     \
                                                  double);

namespace h2expr::detail {
H2EXPR_INSTANCES(H2EXPR_SVD_INSTANCES, extern template)
// The Gram eigensolver (and its fallback SVD) in double, used by every scalar type: compiled once, with
// the double instances, so the float ones do not compile Eigen's double solvers a second time.
extern template void gram_right_singular<double>(const dense<double>&, double, double, Eigen::VectorXd&,
                                                 dense<double>&);
extern template bool reduced_right_singular<double>(const dense<double>&, double, Eigen::VectorXd&, dense<double>&);
}  // namespace h2expr::detail
