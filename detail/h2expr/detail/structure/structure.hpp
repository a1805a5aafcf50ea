#pragma once
// structure<T>: the structure of a hierarchical matrix alone — row and column cluster trees, the
// matrix tree (low-rank blocks per level, dense leaves) and the points in tree order — without any
// numbers. Immutable and shared: copies are cheap, and many matrices may use one structure.
#include <h2expr/detail/structure/build_options.hpp>
#include <h2expr/detail/structure/cluster_tree.hpp>
#include <h2expr/detail/structure/matrix_tree.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/structure/point_cloud.hpp>
#include <h2expr/detail/core/view.hpp>

#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {
namespace detail {
struct structure_access;  // h2_file.hpp: a structure read back from a file
}

template <class T>
class structure {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "h2expr: T must be float or double");

 public:
  using value_type = T;

  // KD-tree clustering of the points, then general admissibility with options.eta (or weak
  // admissibility when options.weak_admissibility). Rows and columns share the one tree.
  template <int D>
  static structure from_points(const point_cloud<T, D>& points, const build_options& options = {}) {
    validate(options);
    detail::require(points.size() >= 1, "structure::from_points: the point cloud is empty");
    auto tree = std::make_shared<const detail::cluster_tree>(detail::build_kd_tree<T, D>(points.coords(), options.leaf_size));
    std::vector<T> tree_points(std::size_t(points.size()) * D);
    for (int p = 0; p < points.size(); ++p)
      for (int k = 0; k < D; ++k) tree_points[std::size_t(p) * D + k] = points[tree->perm[std::size_t(p)]][k];
    return structure(tree, tree, options, std::move(tree_points));
  }

  // Weak admissibility on contiguous index ranges, no geometry (HODLR-like): for operators given only
  // by their size, e.g. a Schur complement on an interface whose points are unknown.
  static structure weak(index n, int leaf_size) {
    detail::require(n >= 1, "structure::weak: n must be >= 1 (got " + std::to_string(n) + ")");
    detail::require(n <= std::numeric_limits<int>::max(), "structure::weak: n too large (" + std::to_string(n) + ")");
    build_options options;
    options.leaf_size = leaf_size;
    options.weak_admissibility = true;
    validate(options);
    auto tree = std::make_shared<const detail::cluster_tree>(detail::build_index_tree(int(n), leaf_size));
    return structure(tree, tree, options, {});
  }

  // An empty handle (no structure yet, e.g. "deduce from the operands"); its accessors throw
  // h2expr::missing_structure.
  structure() = default;
  bool empty() const { return !data_; }

  index rows() const { return get().row_tree->points(); }
  index cols() const { return get().col_tree->points(); }
  int depth() const { return get().row_tree->depth; }
  int dimension() const { return get().row_tree->dim; }  // 0 for weak
  const detail::cluster_tree& row_tree() const { return *get().row_tree; }
  const detail::cluster_tree& col_tree() const { return *get().col_tree; }  // the same tree for kernel matrices
  const detail::matrix_tree& blocks() const { return get().blocks; }
  const build_options& options() const { return get().options; }
  // Points in tree order, dimension() values each (empty for weak).
  const std::vector<T>& tree_points() const { return get().tree_points; }
  // Whether rows and columns share one cluster tree (kernel matrices on one point set).
  bool symmetric_trees() const { return get().row_tree == get().col_tree; }

  // Summary counts, for printing.
  std::vector<int> low_rank_blocks_per_level() const {
    std::vector<int> counts;
    for (const auto& level : get().blocks.coupling) counts.push_back(level.blocks());
    return counts;
  }
  int dense_blocks() const { return get().blocks.dense.blocks(); }

  // Two handles to the same structure (not merely equal ones).
  friend bool operator==(const structure& a, const structure& b) { return a.data_ == b.data_; }

 private:
  friend struct detail::structure_access;
  struct data {
    std::shared_ptr<const detail::cluster_tree> row_tree, col_tree;
    detail::matrix_tree blocks;
    build_options options;
    std::vector<T> tree_points;
  };

  structure(std::shared_ptr<const detail::cluster_tree> row_tree, std::shared_ptr<const detail::cluster_tree> col_tree,
            const build_options& options, std::vector<T> tree_points) {
    auto d = std::make_shared<data>();
    d->blocks = detail::build_matrix_tree(*row_tree, *col_tree, options.eta, options.weak_admissibility);
    d->row_tree = std::move(row_tree);
    d->col_tree = std::move(col_tree);
    d->options = options;
    d->tree_points = std::move(tree_points);
    data_ = std::move(d);
  }

  // From saved parts: the matrix tree as it was built, not rebuilt (load must give back the matrix
  // that was saved, whatever later versions decide about admissibility).
  structure(std::shared_ptr<const detail::cluster_tree> row_tree, std::shared_ptr<const detail::cluster_tree> col_tree,
            detail::matrix_tree blocks, const build_options& options, std::vector<T> tree_points) {
    auto d = std::make_shared<data>();
    d->blocks = std::move(blocks);
    d->row_tree = std::move(row_tree);
    d->col_tree = std::move(col_tree);
    d->options = options;
    d->tree_points = std::move(tree_points);
    data_ = std::move(d);
  }

  const data& get() const {
    detail::require<missing_structure>(data_ != nullptr, "structure: this handle is empty (default-constructed)");
    return *data_;
  }

  std::shared_ptr<const data> data_;  // shareable and cheap to copy
};

}  // namespace h2expr
