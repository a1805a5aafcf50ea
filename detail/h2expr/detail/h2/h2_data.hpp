#pragma once
// What an h2_matrix<T, Space> holds, in the layouts the batched phases read without marshaling:
// every level of every tree is one strided batch (leaves padded to m_max rows, uniform rank per
// level), and the blocks of a level are block-sparse rows (with a by-columns view for A^T).
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/primitives/batch.hpp>
#include <h2expr/detail/structure/matrix_tree.hpp>
#include <h2expr/detail/structure/structure.hpp>

#include <cstdint>
#include <memory>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
buffer<T, Space> clone(const buffer<T, Space>& b) {
  if (b.empty()) return buffer<T, Space>();
  buffer<T, Space> c(b.context(), b.size());
  copy(*b.context(), b.data(), c.data(), b.size());
  return c;
}

// Where the nodes of a basis tree sit, per level l and node t: its rank k(l, t), its coefficient rows
// at(l, t) .. at(l, t) + k(l, t) of the level's total(l) (a leaf's columns start at column at(L, t)
// of the leaf blocks), and the stacked transfers [E_2j; E_2j+1] of parent j of level l - 1 at
// transfer(l, j), with leading dimension k(l, 2j) + k(l, 2j + 1).
struct basis_layout {
  std::vector<std::vector<int>> rank;
  std::vector<std::vector<std::int64_t>> start, transfers;
  int k(int l, int t) const { return rank[l][t]; }
  std::int64_t at(int l, int t) const { return start[l][t]; }
  std::int64_t total(int l) const { return start[l].back(); }
  std::int64_t transfer(int l, int j) const { return transfers[l][j]; }
  int stack(int l, int j) const { return rank[l][2 * j] + rank[l][2 * j + 1]; }
  // Batch views (batch.hpp) of a basis and of coefficients in this layout. The leaves: leaf t is m x k_t
  // at base + m at(L, t) (ld m); level l's transfers: parent j's stacked [E_2j; E_2j+1], stack(l, j) x
  // k_(l-1, j); level l's coefficients of nv vectors: node t's k_t x nv at base + at(l, t) (ld total(l));
  // stacked: parent j's children's, stack(l, j) x nv from at(l, 2j).
  template <class T, class Space>
  batch<T, Space> leaf_batch(const context_ptr<Space>& ctx, T* base, int m) const {
    const int L = int(rank.size()) - 1;
    batch<T, Space> b(ctx);
    for (int t = 0; t < 1 << L; ++t) b.add(base + std::int64_t(m) * at(L, t), m, k(L, t), std::max(m, 1));
    return b;
  }
  template <class T, class Space>
  batch<T, Space> transfer_batch(const context_ptr<Space>& ctx, T* base, int l) const {
    batch<T, Space> b(ctx);
    for (int j = 0; j < 1 << (l - 1); ++j) b.add(base + transfer(l, j), stack(l, j), k(l - 1, j), std::max(stack(l, j), 1));
    return b;
  }
  template <class T, class Space>
  batch<T, Space> coefficient_batch(const context_ptr<Space>& ctx, T* base, int l, int nv) const {
    batch<T, Space> b(ctx);
    for (int t = 0; t < 1 << l; ++t) b.add(base + at(l, t), k(l, t), nv, int(std::max<std::int64_t>(total(l), 1)));
    return b;
  }
  template <class T, class Space>
  batch<T, Space> stacked_coefficient_batch(const context_ptr<Space>& ctx, T* base, int l, int nv) const {
    batch<T, Space> b(ctx);
    for (int j = 0; j < 1 << (l - 1); ++j)
      b.add(base + at(l, 2 * j), stack(l, j), nv, int(std::max<std::int64_t>(total(l), 1)));
    return b;
  }
  // The ranks of one level, or -1 when its nodes differ.
  int uniform_rank(int l) const {
    for (int v : rank[l])
      if (v != rank[l][0]) return -1;
    return rank[l].empty() ? 0 : rank[l][0];
  }
};

// node_rank[l][t], or the level's rank for every node when node_rank is empty.
inline basis_layout make_basis_layout(const std::vector<std::vector<int>>& node_rank, const std::vector<int>& level_rank) {
  const int L = int(level_rank.size()) - 1;
  basis_layout b;
  b.rank.resize(L + 1), b.start.resize(L + 1), b.transfers.resize(L + 1);
  for (int l = 0; l <= L; ++l) {
    const std::size_t nodes = std::size_t(1) << l;
    b.rank[l] = node_rank.empty() ? std::vector<int>(nodes, level_rank[l]) : node_rank[l];
    b.start[l].assign(nodes + 1, 0);
    for (std::size_t t = 0; t < nodes; ++t) b.start[l][t + 1] = b.start[l][t] + b.rank[l][t];
  }
  for (int l = 1; l <= L; ++l) {
    const std::size_t parents = std::size_t(1) << (l - 1);
    b.transfers[l].assign(parents + 1, 0);
    for (std::size_t j = 0; j < parents; ++j)
      b.transfers[l][j + 1] = b.transfers[l][j] + std::int64_t(b.stack(l, int(j))) * b.rank[l - 1][j];
  }
  return b;
}

// A nested basis: explicit leaves (m_max rows per leaf, zero rows for padding) and, for l = 1..depth,
// the transfer matrices into level l - 1 stacked per parent: [E_2j; E_2j+1] per parent j. Ranks are
// uniform per level (h2_data::rank: the layouts the batched phases read as strided batches) unless
// node_rank gives one per node (compress stores its result so, without padding; see basis_layout).
template <class T, class Space>
struct basis_tree {
  buffer<T, Space> leaves;
  std::vector<buffer<T, Space>> transfers;  // index l = 1..depth (index 0 unused)
  std::vector<std::vector<int>> node_rank;  // per level and node; empty: uniform
  // Columns orthonormal (or zero, past a node's rank) by construction: set by orthogonalize, kept by
  // clone and relayout, false for every other new basis. compress() then skips its orthogonalization.
  bool orthonormal = false;
  basis_layout layout(const std::vector<int>& level_rank) const { return make_basis_layout(node_rank, level_rank); }
  std::size_t bytes() const {
    std::size_t s = leaves.size();
    for (const auto& t : transfers) s += t.size();
    return s * sizeof(T);
  }
  basis_tree clone() const {
    basis_tree c;
    c.leaves = detail::clone(leaves);
    for (const auto& t : transfers) c.transfers.push_back(detail::clone(t));
    c.node_rank = node_rank;
    c.orthonormal = orthonormal;
    return c;
  }
};

// One block_sparse_level in the space's memory.
template <class Space>
struct level_arrays {
  buffer<int, Space> row_ptr, col, col_ptr, row_of, block_of;
  level_arrays() = default;
  level_arrays(const context_ptr<Space>& ctx, const block_sparse_level& l)
      : row_ptr(ctx, l.row_ptr), col(ctx, l.col), col_ptr(ctx, l.col_ptr), row_of(ctx, l.row_of),
        block_of(ctx, l.block_of) {}
};

// The structure's index arrays in the space, shared by all matrices of one structure and space.
template <class Space>
struct space_structure {
  std::vector<level_arrays<Space>> coupling;
  std::vector<int> coupling_blocks;  // per level, on the host: which levels the sweeps must reach
  level_arrays<Space> dense;
  buffer<int, Space> padded_to_user;  // padded tree position (leaf * m_max + i) -> user index, or -1
  space_structure(const context_ptr<Space>& ctx, const cluster_tree& tree, const matrix_tree& blocks, int m_max) {
    for (const auto& l : blocks.coupling) coupling.emplace_back(ctx, l), coupling_blocks.push_back(l.blocks());
    dense = level_arrays<Space>(ctx, blocks.dense);
    const int first = cluster_tree::level_begin(tree.depth), leaves = cluster_tree::level_size(tree.depth);
    std::vector<int> map(std::size_t(leaves) * m_max, -1);
    for (int l = 0; l < leaves; ++l)
      for (int p = tree.begin[first + l]; p < tree.end[first + l]; ++p)
        map[std::size_t(l) * m_max + (p - tree.begin[first + l])] = tree.perm[p];
    padded_to_user = buffer<int, Space>(ctx, map);
  }
};

// The row order of a block of vectors: the user's (tree == null), or the padded tree order of one
// cluster tree (row leaf * m + i; padding rows hold zeros), the order every H2 phase works in. Operands
// on that tree exchange blocks in it with no reordering (hara of A * A: samples, inner products).
template <class Space>
struct padded_order {
  const cluster_tree* tree = nullptr;
  const int* map = nullptr;  // padded position -> user index, or -1 (space_structure::padded_to_user)
  index n = 0, np = 0;       // user rows, padded rows
  bool user() const { return tree == nullptr; }
  index rows(index user_rows) const { return user() ? user_rows : np; }
};

template <class T, class Space>
struct h2_data {
  context_ptr<Space> ctx;
  ::h2expr::structure<T> structure;
  int m_max = 0;                  // rows of the largest leaf: the padded leaf size
  std::vector<int> rank;          // per level 0..depth (the largest node rank when the bases are compact)
  std::shared_ptr<basis_tree<T, Space>> row_basis, col_basis;  // the same object when U = V
  std::vector<buffer<T, Space>> coupling;  // per level: blocks(l) of rank[l] x rank[l] (or k_t x k_s), row order
  buffer<T, Space> dense;                  // dense leaves, m_max x m_max each (zero padded), row order
  std::shared_ptr<const space_structure<Space>> arrays;
  bool symmetric = false;  // known to equal its transpose (a symmetric kernel, or built so by hara)

  int depth() const { return structure.depth(); }
  // Ranks per node stored without padding (after compress); the algorithms that update bases work on
  // the uniform layout (see compact.hpp).
  bool compact() const { return !row_basis->node_rank.empty() || !col_basis->node_rank.empty(); }
  // Offsets of the coupling blocks of level l (k_row(t) x k_col(s) each, in row order; blocks + 1).
  std::vector<std::int64_t> coupling_offsets(int l, const basis_layout& rows, const basis_layout& cols) const {
    const auto& lv = structure.blocks().coupling[l];
    std::vector<std::int64_t> o(std::size_t(lv.blocks()) + 1, 0);
    for (int t = 0; t + 1 < int(lv.row_ptr.size()); ++t)
      for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) o[b + 1] = o[b] + std::int64_t(rows.k(l, t)) * cols.k(l, lv.col[b]);
    return o;
  }
  std::size_t bytes() const {
    std::size_t s = row_basis->bytes() + (col_basis != row_basis ? col_basis->bytes() : 0);
    for (const auto& c : coupling) s += c.size() * sizeof(T);
    return s + dense.size() * sizeof(T);
  }
  // Blocks of vectors in this matrix's padded tree order (its rows' tree).
  padded_order<Space> padded() const {
    const auto& tree = structure.row_tree();
    return {&tree, arrays->padded_to_user.data(), index(tree.points()), index(1 << depth()) * m_max};
  }
  // Whether op(A) reads and writes blocks in the padded order o with no reordering: its rows and
  // columns are clustered as o's tree (A * B of two matrices built on one point set each).
  bool works_in(const padded_order<Space>& o) const {
    return !o.user() && structure.symmetric_trees() && structure.row_tree().same_clusters(*o.tree);
  }
  h2_data clone() const {
    h2_data c;
    c.ctx = ctx, c.structure = structure, c.m_max = m_max, c.rank = rank, c.arrays = arrays, c.symmetric = symmetric;
    c.row_basis = std::make_shared<basis_tree<T, Space>>(row_basis->clone());
    c.col_basis = col_basis == row_basis ? c.row_basis : std::make_shared<basis_tree<T, Space>>(col_basis->clone());
    for (const auto& b : coupling) c.coupling.push_back(detail::clone(b));
    c.dense = detail::clone(dense);
    return c;
  }
};

// The mutable representation of an H2 matrix (h2_matrix's h2_data, a distributed::h2_matrix's share;
// each befriends this), for h2expr's operations that change one in place (orthogonalize, compress,
// hara's builders, load): a user changes a matrix only through those.
struct h2_access {
  template <class Matrix>
  static auto& data(Matrix& A) { return A.d_; }
};

}  // namespace h2expr::detail
