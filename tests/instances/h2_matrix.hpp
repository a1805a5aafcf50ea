#pragma once
// Instances of the H2 matrix algorithms: HGEMV (every product with vectors goes through it),
// orthogonalize, compress and to_dense.
#include <h2expr/compress.hpp>
#include <h2expr/detail/h2/hgemv.hpp>
#include <h2expr/h2_matrix.hpp>
#include <h2expr/orthogonalize.hpp>

#include "instances/primitives.hpp"
#include "instances/spaces.hpp"

#define H2EXPR_H2_MATRIX_INSTANCES(kind, T, S)                                                                   \
  kind void ::h2expr::detail::hgemv<T, S>(const ::h2expr::detail::h2_data<T, S>&, ::h2expr::detail::op, T,      \
                                          ::h2expr::const_view<T, S>, T, ::h2expr::view<T, S>,                  \
                                          ::h2expr::detail::hgemv_phases*);                                     \
  kind void ::h2expr::orthogonalize<T, S>(::h2expr::h2_matrix<T, S>&);                                          \
  kind ::h2expr::compress_report h2expr::compress<T, S>(::h2expr::h2_matrix<T, S>&, double,                     \
                                                       const ::h2expr::compress_options&);                      \
  kind Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> h2expr::to_dense<T, S>(const ::h2expr::h2_matrix<T, S>&);

H2EXPR_INSTANCES(H2EXPR_H2_MATRIX_INSTANCES, extern template)
