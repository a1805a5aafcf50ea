#pragma once
// cluster_tree: the row or column clustering of a hierarchical matrix, flattened as a complete
// binary tree in heap order so that each level is one contiguous batch of nodes. Built by a
// KD-tree (median split along the longest bounding-box edge) or from index ranges alone.
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace h2expr::detail {

struct cluster_tree {
  // A complete binary tree in heap order: node i has children 2i+1, 2i+2 and parent (i-1)/2; all leaves
  // are at level `depth`; level l holds nodes [(1<<l)-1, (1<<(l+1))-1). Every level is one batch.
  int depth = 0;                         // leaf level
  int dim = 0;                           // spatial dimension of the boxes (0 when built from indices only)
  std::vector<int> perm;                 // perm[p] = user index of the point at tree position p
  std::vector<int> begin, end;           // per node: [begin, end) in tree positions
  std::vector<double> box_min, box_max;  // per node, dim values each: bounding box of the node's points
                                         // (all zeros for an empty node)
  int max_leaf_size = 0;                 // largest leaf (all leaves have max_leaf_size or max_leaf_size - 1
                                         // points, or fewer when n is tiny)

  static int level_begin(int l) { return (1 << l) - 1; }
  static int level_size(int l) { return 1 << l; }
  static int level_of(int node) { return std::bit_width(unsigned(node) + 1u) - 1; }
  static int parent(int node) { return (node - 1) / 2; }
  static int left_child(int node) { return 2 * node + 1; }
  static int right_child(int node) { return 2 * node + 2; }

  int points() const { return int(perm.size()); }  // n
  int nodes() const { return (2 << depth) - 1; }
  int leaves() const { return level_size(depth); }
  int size(int node) const { return end[node] - begin[node]; }
  bool empty(int node) const { return end[node] == begin[node]; }
  bool is_leaf(int node) const { return level_of(node) == depth; }

  double box_lo(int node, int k) const { return box_min[std::size_t(node) * dim + k]; }
  double box_hi(int node, int k) const { return box_max[std::size_t(node) * dim + k]; }
  double center(int node, int k) const { return 0.5 * (box_lo(node, k) + box_hi(node, k)); }
  // Length of the bounding box's diagonal.
  double diameter(int node) const {
    double d2 = 0;
    for (int k = 0; k < dim; ++k) {
      const double e = box_hi(node, k) - box_lo(node, k);
      d2 += e * e;
    }
    return std::sqrt(d2);
  }
  // The same clusters: the same points in each node (so the same padded order), whatever the boxes.
  bool same_clusters(const cluster_tree& o) const {
    return this == &o || (depth == o.depth && max_leaf_size == o.max_leaf_size && perm == o.perm && begin == o.begin &&
                          end == o.end);
  }
  // position[i] = tree position of user index i (the inverse of perm).
  std::vector<int> positions() const {
    std::vector<int> pos(perm.size());
    for (std::size_t p = 0; p < perm.size(); ++p) pos[std::size_t(perm[p])] = int(p);
    return pos;
  }
};

// The smallest depth L with ceil(n / 2^L) <= leaf_size, and the node ranges of the balanced tree that
// splits every node by count (left child floor(size/2)), so that sizes at one level differ by <= 1.
// perm is the identity; geometry, if any, permutes it afterwards.
inline cluster_tree balanced_index_ranges(int n, int leaf_size) {
  require(n >= 1, "cluster tree: the point set is empty (n = " + std::to_string(n) + ")");
  require(leaf_size >= 1, "cluster tree: leaf_size must be >= 1 (got " + std::to_string(leaf_size) + ")");
  cluster_tree tree;
  while (((std::int64_t(n) + (std::int64_t(1) << tree.depth) - 1) >> tree.depth) > leaf_size) ++tree.depth;
  const int nodes = tree.nodes();
  tree.perm.resize(std::size_t(n));
  std::iota(tree.perm.begin(), tree.perm.end(), 0);
  tree.begin.assign(std::size_t(nodes), 0);
  tree.end.assign(std::size_t(nodes), 0);
  tree.end[0] = n;
  for (int node = 0; node < cluster_tree::level_begin(tree.depth); ++node) {
    const int mid = tree.begin[node] + tree.size(node) / 2;
    const int l = cluster_tree::left_child(node), r = cluster_tree::right_child(node);
    tree.begin[l] = tree.begin[node];
    tree.end[l] = mid;
    tree.begin[r] = mid;
    tree.end[r] = tree.end[node];
  }
  for (int leaf = cluster_tree::level_begin(tree.depth); leaf < nodes; ++leaf)
    tree.max_leaf_size = std::max(tree.max_leaf_size, tree.size(leaf));
  return tree;
}

// Contiguous index ranges, no geometry (dim 0): the clustering behind structure::weak.
inline cluster_tree build_index_tree(int n, int leaf_size) { return balanced_index_ranges(n, leaf_size); }

// KD-tree: level by level, each node's points are partitioned by rank (std::nth_element, so duplicate
// points split too) along the longest edge of the node's bounding box; the counts are those of
// balanced_index_ranges. Boxes are the tight bounding boxes, in double.
template <class T, int D>
cluster_tree build_kd_tree(const std::vector<std::array<T, D>>& points, int leaf_size) {
  require(points.size() <= std::size_t(std::numeric_limits<int>::max()), "cluster tree: too many points");
  cluster_tree tree = balanced_index_ranges(int(points.size()), leaf_size);
  tree.dim = D;
  const int nodes = tree.nodes();
  tree.box_min.assign(std::size_t(nodes) * D, 0.0);
  tree.box_max.assign(std::size_t(nodes) * D, 0.0);
  for (int node = 0; node < nodes; ++node) {
    const int b = tree.begin[node], e = tree.end[node];
    double* lo = tree.box_min.data() + std::size_t(node) * D;
    double* hi = tree.box_max.data() + std::size_t(node) * D;
    if (b == e) continue;  // empty node (tiny n): zero box, never admissible
    for (int k = 0; k < D; ++k) lo[k] = hi[k] = double(points[std::size_t(tree.perm[b])][k]);
    for (int p = b + 1; p < e; ++p)
      for (int k = 0; k < D; ++k) {
        const double x = double(points[std::size_t(tree.perm[p])][k]);
        lo[k] = std::min(lo[k], x);
        hi[k] = std::max(hi[k], x);
      }
    if (tree.is_leaf(node) || e - b < 2) continue;
    int axis = 0;  // longest edge, the lowest dimension on ties
    for (int k = 1; k < D; ++k)
      if (hi[k] - lo[k] > hi[axis] - lo[axis]) axis = k;
    const int mid = tree.end[cluster_tree::left_child(node)];
    std::nth_element(tree.perm.begin() + b, tree.perm.begin() + mid, tree.perm.begin() + e,
                     [&](int i, int j) { return points[std::size_t(i)][axis] < points[std::size_t(j)][axis]; });
  }
  return tree;
}

}  // namespace h2expr::detail
