#pragma once
// matrix_tree: the blocks of a hierarchical matrix found by a dual traversal of the row and column
// cluster trees: per level the admissible (low-rank) leaves, and the inadmissible leaves at the leaf
// level (dense). Each level is stored block-sparse by rows and, for transposed products, by columns.
#include <h2expr/detail/structure/cluster_tree.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace h2expr::detail {

struct block_sparse_level {  // the blocks (t, s) of one level, block-sparse by rows; t, s are local node
                             // indices within the level (0 .. level_size-1)
  std::vector<int> row_ptr;  // level_size + 1
  std::vector<int> col;      // block b = row_ptr[t] .. row_ptr[t+1]-1 has column col[b]; sorted by column within a row
  // The same blocks by columns (for transposed products): for column s, entries col_ptr[s] .. col_ptr[s+1]-1,
  // sorted by row.
  std::vector<int> col_ptr;   // level_size + 1
  std::vector<int> row_of;    // row node of that entry
  std::vector<int> block_of;  // index b of that block in the row ordering

  int blocks() const { return int(col.size()); }
  int level_size() const { return row_ptr.empty() ? 0 : int(row_ptr.size()) - 1; }
  int max_blocks_per_row() const {
    int m = 0;
    for (std::size_t t = 0; t + 1 < row_ptr.size(); ++t) m = std::max(m, row_ptr[t + 1] - row_ptr[t]);
    return m;
  }
  int max_blocks_per_col() const {
    int m = 0;
    for (std::size_t s = 0; s + 1 < col_ptr.size(); ++s) m = std::max(m, col_ptr[s + 1] - col_ptr[s]);
    return m;
  }
  // Row of block b (a search in row_ptr; for setup code, not inner loops).
  int row_of_block(int b) const {
    return int(std::upper_bound(row_ptr.begin(), row_ptr.end(), b) - row_ptr.begin()) - 1;
  }
};

// Both orderings of a level from its list of (t, s) pairs (local indices).
inline block_sparse_level make_block_sparse_level(int level_size, std::vector<std::pair<int, int>> pairs) {
  std::sort(pairs.begin(), pairs.end());
  block_sparse_level lvl;
  const int nb = int(pairs.size());
  lvl.row_ptr.assign(std::size_t(level_size) + 1, 0);
  lvl.col_ptr.assign(std::size_t(level_size) + 1, 0);
  lvl.col.resize(std::size_t(nb));
  for (int b = 0; b < nb; ++b) {
    ++lvl.row_ptr[std::size_t(pairs[b].first) + 1];
    ++lvl.col_ptr[std::size_t(pairs[b].second) + 1];
    lvl.col[std::size_t(b)] = pairs[b].second;
  }
  for (int i = 0; i < level_size; ++i) {
    lvl.row_ptr[i + 1] += lvl.row_ptr[i];
    lvl.col_ptr[i + 1] += lvl.col_ptr[i];
  }
  // Counting sort by column; blocks arrive in row order, so each column's entries stay sorted by row.
  lvl.row_of.resize(std::size_t(nb));
  lvl.block_of.resize(std::size_t(nb));
  std::vector<int> next(lvl.col_ptr.begin(), lvl.col_ptr.end() - 1);
  for (int b = 0; b < nb; ++b) {
    const int e = next[std::size_t(pairs[b].second)]++;
    lvl.row_of[std::size_t(e)] = pairs[b].first;
    lvl.block_of[std::size_t(e)] = b;
  }
  return lvl;
}

struct matrix_tree {
  std::vector<block_sparse_level> coupling;  // levels 0..depth: admissible (low-rank) leaves of the matrix tree
  block_sparse_level dense;                  // inadmissible leaves at level depth
  int depth() const { return int(coupling.size()) - 1; }
};

// General admissibility: 0.5 * (diam_t + diam_s) <= eta * |c_t - c_s| with bounding-box diagonals and
// centres. Boxes with the same centre are never admissible (not even two zero-size boxes: a block of
// coincident points is no far field).
inline bool admissible(const cluster_tree& rows, int t, const cluster_tree& cols, int s, double eta) {
  double dist2 = 0;
  for (int k = 0; k < rows.dim; ++k) {
    const double d = rows.center(t, k) - cols.center(s, k);
    dist2 += d * d;
  }
  const double dist = std::sqrt(dist2);
  return dist > 0 && 0.5 * (rows.diameter(t) + cols.diameter(s)) <= eta * dist;
}

// Dual traversal from (root, root), level by level: a pair is a low-rank leaf if admissible; otherwise a
// dense leaf at the leaf level, else its 4 child pairs go to the next level. Pairs with an empty node
// are dropped. weak: admissible iff t != s (the only choice for index trees, dim 0).
inline matrix_tree build_matrix_tree(const cluster_tree& rows, const cluster_tree& cols, double eta, bool weak) {
  require(rows.depth == cols.depth, "matrix tree: row and column trees differ in depth (" +
                                        std::to_string(rows.depth) + " vs " + std::to_string(cols.depth) + ")");
  if (!weak) {
    require(rows.dim > 0 && cols.dim > 0,
            "matrix tree: general admissibility needs point coordinates; index trees allow only weak admissibility");
    require(rows.dim == cols.dim, "matrix tree: row and column points differ in dimension");
    require(std::isfinite(eta) && eta > 0, "matrix tree: eta must be finite and > 0 (got " + std::to_string(eta) + ")");
  }
  const int depth = rows.depth;
  matrix_tree mt;
  mt.coupling.reserve(std::size_t(depth) + 1);
  std::vector<std::pair<int, int>> inadmissible{{0, 0}}, next, low_rank, dense;
  for (int l = 0; l <= depth; ++l) {
    const int first = cluster_tree::level_begin(l);
    low_rank.clear();
    next.clear();
    for (const auto& [t, s] : inadmissible) {
      if (rows.empty(t) || cols.empty(s)) continue;
      if (weak ? t != s : admissible(rows, t, cols, s, eta)) {
        low_rank.emplace_back(t - first, s - first);
      } else if (l == depth) {
        dense.emplace_back(t - first, s - first);
      } else {
        for (int tc : {cluster_tree::left_child(t), cluster_tree::right_child(t)})
          for (int sc : {cluster_tree::left_child(s), cluster_tree::right_child(s)}) next.emplace_back(tc, sc);
      }
    }
    mt.coupling.push_back(make_block_sparse_level(cluster_tree::level_size(l), low_rank));
    std::swap(inadmissible, next);
  }
  mt.dense = make_block_sparse_level(cluster_tree::level_size(depth), std::move(dense));
  return mt;
}

}  // namespace h2expr::detail
