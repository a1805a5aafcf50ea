#pragma once
// What an h2_matrix<T, Space> holds, in the layouts the batched phases read without marshaling:
// every level of every tree is one strided batch (leaves padded to m_max rows, uniform rank per
// level), and the blocks of a level are block-sparse rows (with a by-columns view for A^T).
#include <h2expr/detail/buffer.hpp>
#include <h2expr/detail/matrix_tree.hpp>
#include <h2expr/structure.hpp>

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

// A nested basis: explicit leaves (m_max x rank[depth] per leaf, zero rows for padding) and, for
// l = 1..depth, the transfer matrices into level l - 1 stacked per parent: [E_2j; E_2j+1], a
// 2 rank[l] x rank[l-1] block per parent j.
template <class T, class Space>
struct basis_tree {
  buffer<T, Space> leaves;
  std::vector<buffer<T, Space>> transfers;  // index l = 1..depth (index 0 unused)
  std::size_t bytes() const {
    std::size_t s = leaves.size();
    for (const auto& t : transfers) s += t.size();
    return s * sizeof(T);
  }
  basis_tree clone() const {
    basis_tree c;
    c.leaves = detail::clone(leaves);
    for (const auto& t : transfers) c.transfers.push_back(detail::clone(t));
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

template <class T, class Space>
struct h2_data {
  context_ptr<Space> ctx;
  ::h2expr::structure<T> structure;
  int m_max = 0;                  // rows of the largest leaf: the padded leaf size
  std::vector<int> rank;          // per level 0..depth
  std::shared_ptr<basis_tree<T, Space>> row_basis, col_basis;  // the same object when U = V
  std::vector<buffer<T, Space>> coupling;  // per level: blocks(l) of rank[l] x rank[l], row order
  buffer<T, Space> dense;                  // dense leaves, m_max x m_max each (zero padded), row order
  std::shared_ptr<const space_structure<Space>> arrays;
  bool symmetric = false;  // known to equal its transpose (a symmetric kernel, or built so by hara)

  int depth() const { return structure.depth(); }
  std::size_t bytes() const {
    std::size_t s = row_basis->bytes() + (col_basis != row_basis ? col_basis->bytes() : 0);
    for (const auto& c : coupling) s += c.size() * sizeof(T);
    return s + dense.size() * sizeof(T);
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

}  // namespace h2expr::detail
