#pragma once
// Per-node ranks stored without padding, and back. compress() truncates every node to its own rank;
// in the uniform layout that leaves zero columns past a node's rank (and zero rows and columns in its
// coupling blocks), so compact() drops zeros only and the operator is unchanged. The algorithms that
// reshape bases (orthogonalize, compress) run on the uniform layout, which pad() restores; they meet
// per-node ranks through on_uniform_layout() alone.
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/primitives/items.hpp>

#include <algorithm>
#include <vector>

namespace h2expr::detail {

// The rank every node of every level keeps, per basis (cols == rows for shared bases).
struct kept_ranks {
  std::vector<std::vector<int>> rows, cols;
};

// A basis tree moved from layout `from` into layout `to`: each block keeps its leading
// min(from, to) rows and columns, anything past them is zero.
template <class T, class Space>
basis_tree<T, Space> relayout(const context_ptr<Space>& ctx, const basis_tree<T, Space>& B, const basis_layout& from,
                              const basis_layout& to, int m) {
  const int L = int(from.rank.size()) - 1, leaves = 1 << L;
  basis_tree<T, Space> N;
  N.orthonormal = B.orthonormal;  // blocks keep their leading columns; what is cut or added is zero
  N.leaves = buffer<T, Space>(ctx, std::size_t(m) * to.total(L));
  fill(*ctx, N.leaves.data(), N.leaves.size(), T(0));
  std::vector<item_copy> items;
  for (int t = 0; t < leaves; ++t)
    items.push_back({m, std::min(from.k(L, t), to.k(L, t)), m * from.at(L, t), m * to.at(L, t), m, m});
  copy_items(ctx, B.leaves.data(), N.leaves.data(), items);
  N.transfers.resize(L + 1);
  for (int l = 1; l <= L; ++l) {
    N.transfers[l] = buffer<T, Space>(ctx, std::size_t(to.transfers[l].back()));
    fill(*ctx, N.transfers[l].data(), N.transfers[l].size(), T(0));
    items.clear();
    for (int j = 0; j < 1 << (l - 1); ++j)
      for (int h = 0; h < 2; ++h) {  // child 2j + h: its rows of the parent's stack
        const int c = 2 * j + h;
        items.push_back({std::min(from.k(l, c), to.k(l, c)), std::min(from.k(l - 1, j), to.k(l - 1, j)),
                         from.transfer(l, j) + (h ? from.k(l, 2 * j) : 0), to.transfer(l, j) + (h ? to.k(l, 2 * j) : 0),
                         std::max(from.stack(l, j), 1), std::max(to.stack(l, j), 1)});
      }
    copy_items(ctx, B.transfers[l].data(), N.transfers[l].data(), items);
  }
  return N;
}

// The coupling blocks of A from the layouts (fr, fc) of its bases into (tr, tc), as relayout().
template <class T, class Space>
std::vector<buffer<T, Space>> relayout_coupling(const h2_data<T, Space>& A, const basis_layout& fr, const basis_layout& fc,
                                                const basis_layout& tr, const basis_layout& tc) {
  std::vector<buffer<T, Space>> S(A.depth() + 1);
  for (int l = 0; l <= A.depth(); ++l) {
    const auto& lv = A.structure.blocks().coupling[l];
    const auto from = A.coupling_offsets(l, fr, fc), to = A.coupling_offsets(l, tr, tc);
    S[l] = buffer<T, Space>(A.ctx, std::size_t(to.back()));
    fill(*A.ctx, S[l].data(), S[l].size(), T(0));
    std::vector<item_copy> items;
    for (int t = 0; t + 1 < int(lv.row_ptr.size()); ++t)
      for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) {
        const int s = lv.col[b];
        items.push_back({std::min(fr.k(l, t), tr.k(l, t)), std::min(fc.k(l, s), tc.k(l, s)), from[b], to[b],
                         std::max(fr.k(l, t), 1), std::max(tr.k(l, t), 1)});
      }
    copy_items(A.ctx, A.coupling[l].data(), S[l].data(), items);
  }
  return S;
}

// Back to the uniform layout of A.rank (zero padding); nothing to do when A is not compact.
template <class T, class Space>
void pad(h2_data<T, Space>& A) {
  if (!A.compact()) return;
  const basis_layout uniform = make_basis_layout({}, A.rank);
  const basis_layout fr = A.row_basis->layout(A.rank), fc = A.col_basis->layout(A.rank);
  A.coupling = relayout_coupling(A, fr, fc, uniform, uniform);
  const bool shared = A.row_basis == A.col_basis;
  auto row = std::make_shared<basis_tree<T, Space>>(relayout(A.ctx, *A.row_basis, fr, uniform, A.m_max));
  A.col_basis = shared ? row : std::make_shared<basis_tree<T, Space>>(relayout(A.ctx, *A.col_basis, fc, uniform, A.m_max));
  A.row_basis = row;
}

// Stores a uniform A with the node ranks rows[l][t] and cols[l][t] (<= A.rank[l]; ignored for
// shared bases) and drops what lies past them, which must be zero or unused; A.rank becomes the
// largest node rank per level. A level whose nodes all keep A.rank[l] stays as it was.
template <class T, class Space>
void compact(h2_data<T, Space>& A, std::vector<std::vector<int>> rows, std::vector<std::vector<int>> cols) {
  require(!A.compact(), "compact: the matrix is compact already");
  const bool shared = A.row_basis == A.col_basis;
  if (shared) cols = rows;
  const int L = A.depth();
  std::vector<int> r(L + 1, 0);
  bool uniform = true;
  for (int l = 0; l <= L; ++l) {
    for (std::size_t t = 0; t < rows[l].size(); ++t) {
      rows[l][t] = std::min(rows[l][t], A.rank[l]), cols[l][t] = std::min(cols[l][t], A.rank[l]);
      r[l] = std::max({r[l], rows[l][t], cols[l][t]});
    }
    for (std::size_t t = 0; t < rows[l].size(); ++t) uniform = uniform && rows[l][t] == r[l] && cols[l][t] == r[l];
  }
  if (uniform && r == A.rank) return;
  const basis_layout from = make_basis_layout({}, A.rank);
  if (uniform) {  // one rank per level after all: the uniform layout at the smaller ranks
    const basis_layout to = make_basis_layout({}, r);
    A.coupling = relayout_coupling(A, from, from, to, to);
    auto row = std::make_shared<basis_tree<T, Space>>(relayout(A.ctx, *A.row_basis, from, to, A.m_max));
    A.col_basis = shared ? row : std::make_shared<basis_tree<T, Space>>(relayout(A.ctx, *A.col_basis, from, to, A.m_max));
    A.row_basis = row;
    A.rank = r;
    return;
  }
  const basis_layout tr = make_basis_layout(rows, r), tc = make_basis_layout(cols, r);
  A.coupling = relayout_coupling(A, from, from, tr, tc);
  auto row = std::make_shared<basis_tree<T, Space>>(relayout(A.ctx, *A.row_basis, from, tr, A.m_max));
  row->node_rank = std::move(rows);
  if (shared) {
    A.col_basis = row;
  } else {
    A.col_basis = std::make_shared<basis_tree<T, Space>>(relayout(A.ctx, *A.col_basis, from, tc, A.m_max));
    A.col_basis->node_rank = std::move(cols);
  }
  A.row_basis = row;
  A.rank = r;
}

// Runs `reshape` on A in the uniform layout, then stores A at the node ranks it returns.
// reshape(A, own) sees A padded, with `own` the node ranks A had (null when it had one rank per level),
// and returns a kept_ranks (ranks past a node's columns, or past what the layout holds, are lowered).
template <class T, class Space, class Reshape>
void on_uniform_layout(h2_data<T, Space>& A, Reshape&& reshape) {
  kept_ranks own;
  const bool had = A.compact();
  if (had) own = {A.row_basis->layout(A.rank).rank, A.col_basis->layout(A.rank).rank};
  pad(A);
  kept_ranks kept = reshape(A, had ? &own : nullptr);
  compact(A, std::move(kept.rows), std::move(kept.cols));
}

}  // namespace h2expr::detail
