#pragma once
// orthogonalize(A): makes the nested bases of an H2 matrix orthonormal without changing the operator
// (to rounding), the first step of compression. Same algorithm on every space.
#include <h2expr/detail/orthogonalize.hpp>
#include <h2expr/h2_matrix.hpp>

namespace h2expr {

template <class T, class Space>
void orthogonalize(h2_matrix<T, Space>& A) {
  detail::require(A.data().row_basis != nullptr, "orthogonalize of an empty H2 matrix");
  detail::orthogonalize(A.data());
}

}  // namespace h2expr
