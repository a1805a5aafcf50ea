#pragma once
// orthogonalize(A): makes the nested bases of an H2 matrix orthonormal without changing the operator
// (to rounding), the first step of compression. Same algorithm on every space.
#include <h2expr/detail/h2/compact.hpp>
#include <h2expr/detail/h2/h2_matrix.hpp>
#include <h2expr/detail/h2/orthogonalize.hpp>

namespace h2expr {

template <class T, class Space>
void orthogonalize(h2_matrix<T, Space>& A) {
  auto& d = detail::h2_access::data(A);
  detail::require(d.row_basis != nullptr, "orthogonalize of an empty H2 matrix");
  if (!d.compact()) return detail::orthogonalize(d);
  // Per-node ranks: orthogonalize the padded layout (its zero columns give zero rows of the R factors,
  // so the coupling rows past a node's rank stay zero) and store the node ranks again, lowered where a
  // node had more columns than its children together (the extra ones were dependent: now zero).
  detail::on_uniform_layout(d, [](detail::h2_data<T, Space>& u, detail::kept_ranks* own) {
    detail::orthogonalize(u, &own->rows, &own->cols);
    return std::move(*own);
  });
}

}  // namespace h2expr
