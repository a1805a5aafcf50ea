#pragma once
// A += diag(d) on an H2 matrix's dense diagonal leaves, exactly: d (n entries, user order) is gathered
// into padded tree order and added to the diagonal of every leaf's block (t, t). hara() puts an
// operator's exact diagonal part (identity and diagonal terms) there instead of sampling it.
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/core/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
void add_diagonal(h2_data<T, Space>& A, const T* d) {
  const auto& S = A.structure;
  require<dimension_mismatch>(S.rows() == S.cols(), "add_diagonal: the matrix is not square");
  require(S.symmetric_trees(), "add_diagonal: the row and column trees differ (a leaf's block (t, t) is not diagonal)");
  const auto& dense = S.blocks().dense;
  const int leaves = int(dense.row_ptr.size()) - 1, m = A.m_max;
  std::vector<int> block(std::size_t(std::max(leaves, 0)), -1);
  for (int t = 0; t < leaves; ++t)
    for (int b = dense.row_ptr[t]; b < dense.row_ptr[t + 1]; ++b)
      if (dense.col[b] == t) block[t] = b;
  for (int t = 0; t < leaves; ++t)
    require(block[t] >= 0, "add_diagonal: the structure has no dense block (" + std::to_string(t) + ", " +
                               std::to_string(t) + ") to hold the diagonal");
  if (leaves == 0 || m == 0) return;
  auto& c = *A.ctx;
  const std::int64_t np = std::int64_t(leaves) * m;
  buffer<T, Space> dp(A.ctx, std::size_t(np));
  gather_rows(c, A.arrays->padded_to_user.data(), np, d, std::int64_t(S.rows()), dp.data(), np, 1);
  const buffer<int, Space> blocks(A.ctx, block);
  add_to_diagonals(c, leaves, m, T(1), dp.data(), blocks.data(), A.dense.data());  // (freed in stream order)
}

}  // namespace h2expr::detail
