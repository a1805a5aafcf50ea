// Structure layer: point clouds, KD-tree clustering, admissibility and the matrix tree, checked
// against brute force on small problems.
#include <gtest/gtest.h>
#include <h2expr/build_options.hpp>
#include <h2expr/error.hpp>
#include <h2expr/point_cloud.hpp>
#include <h2expr/structure.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <vector>

namespace hx = h2expr;
using hx::detail::cluster_tree;

namespace {

// ---------------------------------------------------------------------------------------------
// Brute-force references.

template <std::size_t D>
struct box {
  std::array<double, D> lo, hi;
  double diameter() const {
    double d2 = 0;
    for (std::size_t k = 0; k < D; ++k) d2 += (hi[k] - lo[k]) * (hi[k] - lo[k]);
    return std::sqrt(d2);
  }
  double distance_of_centres(const box& o) const {
    double d2 = 0;
    for (std::size_t k = 0; k < D; ++k) {
      const double d = 0.5 * (lo[k] + hi[k]) - 0.5 * (o.lo[k] + o.hi[k]);
      d2 += d * d;
    }
    return std::sqrt(d2);
  }
};

// The bounding box of a node's points, recomputed from the points.
template <class T, std::size_t D>
box<D> node_box(const cluster_tree& tree, const std::vector<std::array<T, D>>& pts, int node) {
  box<D> b;
  b.lo.fill(std::numeric_limits<double>::infinity());
  b.hi.fill(-std::numeric_limits<double>::infinity());
  for (int p = tree.begin[node]; p < tree.end[node]; ++p)
    for (std::size_t k = 0; k < D; ++k) {
      b.lo[k] = std::min(b.lo[k], double(pts[tree.perm[p]][k]));
      b.hi[k] = std::max(b.hi[k], double(pts[tree.perm[p]][k]));
    }
  return b;
}

long long ceil_div_pow2(long long n, int l) { return (n + (1LL << l) - 1) >> l; }

// Everything TARGETS.md and the cluster_tree comments promise, checked node by node.
void check_index_ranges(const cluster_tree& tree, int n, int leaf_size) {
  ASSERT_EQ(tree.points(), n);
  // depth: the smallest L with ceil(n / 2^L) <= leaf_size
  EXPECT_LE(ceil_div_pow2(n, tree.depth), leaf_size);
  if (tree.depth > 0) EXPECT_GT(ceil_div_pow2(n, tree.depth - 1), leaf_size);
  // perm is a permutation
  std::vector<int> seen(std::size_t(n), 0);
  for (int p : tree.perm) {
    ASSERT_GE(p, 0);
    ASSERT_LT(p, n);
    ++seen[std::size_t(p)];
  }
  for (int c : seen) ASSERT_EQ(c, 1);
  ASSERT_EQ(int(tree.begin.size()), tree.nodes());
  ASSERT_EQ(int(tree.end.size()), tree.nodes());
  EXPECT_EQ(tree.begin[0], 0);
  EXPECT_EQ(tree.end[0], n);
  for (int l = 0; l <= tree.depth; ++l) {
    int lo = n, hi = 0, total = 0;
    for (int node = cluster_tree::level_begin(l); node < cluster_tree::level_begin(l) + cluster_tree::level_size(l); ++node) {
      EXPECT_EQ(cluster_tree::level_of(node), l);
      EXPECT_LE(tree.begin[node], tree.end[node]);
      lo = std::min(lo, tree.size(node));
      hi = std::max(hi, tree.size(node));
      total += tree.size(node);
      if (l < tree.depth) {  // children partition the parent's range, in order
        const int a = cluster_tree::left_child(node), b = cluster_tree::right_child(node);
        EXPECT_EQ(cluster_tree::parent(a), node);
        EXPECT_EQ(cluster_tree::parent(b), node);
        EXPECT_EQ(tree.begin[a], tree.begin[node]);
        EXPECT_EQ(tree.end[a], tree.begin[b]);
        EXPECT_EQ(tree.end[b], tree.end[node]);
      }
    }
    EXPECT_EQ(total, n) << "level " << l;
    EXPECT_LE(hi - lo, 1) << "sizes at level " << l << " differ by more than 1";
  }
  int max_leaf = 0;
  for (int leaf = cluster_tree::level_begin(tree.depth); leaf < tree.nodes(); ++leaf) {
    EXPECT_TRUE(tree.is_leaf(leaf));
    EXPECT_LE(tree.size(leaf), leaf_size);
    max_leaf = std::max(max_leaf, tree.size(leaf));
  }
  EXPECT_EQ(tree.max_leaf_size, max_leaf);
}

template <class T, int D>
void check_kd_tree(const std::vector<std::array<T, D>>& pts, int leaf_size) {
  SCOPED_TRACE("n = " + std::to_string(pts.size()) + ", D = " + std::to_string(D) + ", leaf = " + std::to_string(leaf_size));
  const cluster_tree tree = hx::detail::build_kd_tree<T, D>(pts, leaf_size);
  check_index_ranges(tree, int(pts.size()), leaf_size);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_EQ(tree.dim, D);
  ASSERT_EQ(tree.box_min.size(), std::size_t(tree.nodes()) * D);
  for (int node = 0; node < tree.nodes(); ++node) {
    if (tree.empty(node)) continue;
    // tight boxes: exactly the extremes of the node's points
    const auto b = node_box(tree, pts, node);
    for (int k = 0; k < D; ++k) {
      EXPECT_EQ(tree.box_lo(node, k), b.lo[k]) << "node " << node;
      EXPECT_EQ(tree.box_hi(node, k), b.hi[k]) << "node " << node;
    }
    if (tree.is_leaf(node) || tree.size(node) < 2) continue;
    // split along a longest edge: the left child's points lie at or below the right child's
    double longest = 0;
    for (int k = 0; k < D; ++k) longest = std::max(longest, b.hi[k] - b.lo[k]);
    const auto left = node_box(tree, pts, cluster_tree::left_child(node));
    const auto right = node_box(tree, pts, cluster_tree::right_child(node));
    bool separated_along_a_longest_edge = false;
    for (int k = 0; k < D; ++k)
      if (b.hi[k] - b.lo[k] == longest && (tree.size(cluster_tree::right_child(node)) == 0 ||
                                           tree.size(cluster_tree::left_child(node)) == 0 || left.hi[k] <= right.lo[k]))
        separated_along_a_longest_edge = true;
    EXPECT_TRUE(separated_along_a_longest_edge) << "node " << node;
  }
}

// The matrix tree checked against the points: exact tiling, admissibility of every low-rank leaf,
// inadmissibility of every dense leaf and of every low-rank leaf's parent pair, column view.
template <class T, int D>
void check_matrix_tree(const hx::structure<T>& s, const std::vector<std::array<T, D>>* pts) {
  const auto& rows = s.row_tree();
  const auto& cols = s.col_tree();
  const auto& mt = s.blocks();
  const bool weak = s.options().weak_admissibility;
  const double eta = s.options().eta;
  const int n = int(s.rows()), depth = s.depth();
  ASSERT_EQ(mt.depth(), depth);
  ASSERT_EQ(int(mt.coupling.size()), depth + 1);
  auto is_admissible = [&](int t, int u) {  // global nodes
    if (weak) return t != u;
    const auto bt = node_box(rows, *pts, t), bs = node_box(cols, *pts, u);
    const double dist = bt.distance_of_centres(bs);
    return dist > 0 && 0.5 * (bt.diameter() + bs.diameter()) <= eta * dist;
  };
  std::vector<unsigned char> covered(std::size_t(n) * n, 0);
  auto cover = [&](int t, int u) {
    for (int i = rows.begin[t]; i < rows.end[t]; ++i)
      for (int j = cols.begin[u]; j < cols.end[u]; ++j) ++covered[std::size_t(i) * n + j];
  };
  auto check_level = [&](const hx::detail::block_sparse_level& lvl, int l, bool low_rank) {
    const int size = cluster_tree::level_size(l), first = cluster_tree::level_begin(l);
    ASSERT_EQ(int(lvl.row_ptr.size()), size + 1);
    ASSERT_EQ(int(lvl.col_ptr.size()), size + 1);
    ASSERT_EQ(lvl.row_ptr[0], 0);
    ASSERT_EQ(lvl.row_ptr[size], lvl.blocks());
    ASSERT_EQ(lvl.col_ptr[size], lvl.blocks());
    ASSERT_EQ(int(lvl.row_of.size()), lvl.blocks());
    ASSERT_EQ(int(lvl.block_of.size()), lvl.blocks());
    int max_row = 0, max_col = 0;
    std::set<std::pair<int, int>> by_rows, by_cols;
    for (int t = 0; t < size; ++t) {
      max_row = std::max(max_row, lvl.row_ptr[t + 1] - lvl.row_ptr[t]);
      for (int b = lvl.row_ptr[t]; b < lvl.row_ptr[t + 1]; ++b) {
        const int u = lvl.col[b];
        ASSERT_GE(u, 0);
        ASSERT_LT(u, size);
        if (b > lvl.row_ptr[t]) EXPECT_LT(lvl.col[b - 1], u) << "columns not sorted within a row";
        EXPECT_EQ(lvl.row_of_block(b), t);
        by_rows.insert({t, u});
        const int gt = first + t, gu = first + u;
        EXPECT_FALSE(rows.empty(gt) || cols.empty(gu)) << "block with an empty node";
        if (low_rank) {
          EXPECT_TRUE(is_admissible(gt, gu)) << "level " << l << " block (" << t << ", " << u << ")";
          if (l > 0) EXPECT_FALSE(is_admissible(cluster_tree::parent(gt), cluster_tree::parent(gu)))
              << "low-rank leaf whose parent pair is already admissible";
        } else {
          EXPECT_EQ(l, depth);
          EXPECT_FALSE(is_admissible(gt, gu)) << "dense block (" << t << ", " << u << ") is admissible";
        }
        cover(gt, gu);
      }
    }
    for (int u = 0; u < size; ++u) {
      max_col = std::max(max_col, lvl.col_ptr[u + 1] - lvl.col_ptr[u]);
      for (int e = lvl.col_ptr[u]; e < lvl.col_ptr[u + 1]; ++e) {
        const int b = lvl.block_of[e], t = lvl.row_of[e];
        if (e > lvl.col_ptr[u]) EXPECT_LT(lvl.row_of[e - 1], t) << "rows not sorted within a column";
        EXPECT_EQ(lvl.col[b], u);
        EXPECT_TRUE(b >= lvl.row_ptr[t] && b < lvl.row_ptr[t + 1]);
        by_cols.insert({t, u});
      }
    }
    EXPECT_EQ(by_rows, by_cols);
    EXPECT_EQ(int(by_rows.size()), lvl.blocks()) << "a block listed twice";
    EXPECT_EQ(lvl.max_blocks_per_row(), max_row);
    EXPECT_EQ(lvl.max_blocks_per_col(), max_col);
  };
  for (int l = 0; l <= depth; ++l) {
    check_level(mt.coupling[l], l, true);
    if (::testing::Test::HasFatalFailure()) return;
  }
  check_level(mt.dense, depth, false);
  if (::testing::Test::HasFatalFailure()) return;
  std::size_t bad = 0;
  for (unsigned char c : covered) bad += c != 1;
  EXPECT_EQ(bad, 0u) << "entries of the n x n square not covered exactly once";
  EXPECT_EQ(s.dense_blocks(), mt.dense.blocks());
  const auto per_level = s.low_rank_blocks_per_level();
  ASSERT_EQ(int(per_level.size()), depth + 1);
  for (int l = 0; l <= depth; ++l) EXPECT_EQ(per_level[l], mt.coupling[l].blocks());
}

template <class T, int D>
void check_structure(const hx::point_cloud<T, D>& pc, hx::build_options bo) {
  SCOPED_TRACE("n = " + std::to_string(pc.size()) + ", D = " + std::to_string(D) + ", leaf = " +
               std::to_string(bo.leaf_size) + ", eta = " + std::to_string(bo.eta) + (bo.weak_admissibility ? ", weak" : ""));
  const auto s = hx::structure<T>::from_points(pc, bo);
  EXPECT_EQ(s.rows(), pc.size());
  EXPECT_EQ(s.cols(), pc.size());
  EXPECT_EQ(s.dimension(), D);
  EXPECT_EQ(&s.row_tree(), &s.col_tree());
  check_kd_tree<T, D>(pc.coords(), bo.leaf_size);
  check_matrix_tree<T, D>(s, &pc.coords());
  // tree_points are the points in tree order
  ASSERT_EQ(s.tree_points().size(), std::size_t(pc.size()) * D);
  for (int p = 0; p < pc.size(); ++p)
    for (int k = 0; k < D; ++k) ASSERT_EQ(s.tree_points()[std::size_t(p) * D + k], pc[s.row_tree().perm[p]][k]);
  const auto pos = s.row_tree().positions();
  for (int p = 0; p < pc.size(); ++p) ASSERT_EQ(pos[s.row_tree().perm[p]], p);
}

template <int D>
std::vector<std::array<double, D>> random_points(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::array<double, D>> pts(static_cast<std::size_t>(n));
  for (auto& p : pts)
    for (auto& x : p) x = u(rng);
  return pts;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// build_options

TEST(build_options, designated_initializers_and_defaults) {
  hx::build_options bo{.leaf_size = 32, .eta = 0.7, .cheb_points = 6};
  EXPECT_EQ(bo.leaf_size, 32);
  EXPECT_EQ(bo.eta, 0.7);
  EXPECT_EQ(bo.cheb_points, 6);
  EXPECT_FALSE(bo.weak_admissibility);
  hx::build_options d;
  EXPECT_EQ(d.leaf_size, 64);
  EXPECT_EQ(d.eta, 0.9);
  EXPECT_EQ(d.cheb_points, 8);
  EXPECT_NO_THROW(hx::validate(d));
  hx::build_options w{.weak_admissibility = true};
  EXPECT_TRUE(w.weak_admissibility);
}

TEST(build_options, bad_values_throw) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(hx::validate({.leaf_size = 0}), hx::invalid_argument);
  EXPECT_THROW(hx::validate({.leaf_size = -3}), hx::invalid_argument);
  EXPECT_THROW(hx::validate({.eta = 0}), hx::invalid_argument);
  EXPECT_THROW(hx::validate({.eta = -1}), hx::invalid_argument);
  EXPECT_THROW(hx::validate({.eta = inf}), hx::invalid_argument);
  EXPECT_THROW(hx::validate({.eta = nan}), hx::invalid_argument);
  EXPECT_THROW(hx::validate({.cheb_points = 0}), hx::invalid_argument);
  try {
    hx::validate({.leaf_size = 0});
  } catch (const hx::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("leaf_size"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// point_cloud

TEST(point_cloud, grid_sizes_end_points_spacing) {
  const auto pc = hx::point_cloud<double, 2>::grid({3, 5});
  static_assert(hx::point_cloud<double, 2>::dimension == 2);
  ASSERT_EQ(pc.size(), 15);
  // first dimension fastest
  EXPECT_EQ(pc[0][0], 0.0);
  EXPECT_EQ(pc[0][1], 0.0);
  EXPECT_EQ(pc[1][0], 0.5);
  EXPECT_EQ(pc[1][1], 0.0);
  EXPECT_EQ(pc[2][0], 1.0);
  EXPECT_EQ(pc[3][0], 0.0);
  EXPECT_EQ(pc[3][1], 0.25);
  EXPECT_EQ(pc[14][0], 1.0);
  EXPECT_EQ(pc[14][1], 1.0);
  for (int i = 0; i < pc.size(); ++i) {
    EXPECT_NEAR(pc[i][0], 0.5 * (i % 3), 1e-15);
    EXPECT_NEAR(pc[i][1], 0.25 * (i / 3), 1e-15);
  }
  const auto p3 = hx::point_cloud<float, 3>::grid({4, 3, 2});
  ASSERT_EQ(p3.size(), 24);
  EXPECT_EQ(p3[23][0], 1.0f);
  EXPECT_EQ(p3[23][1], 1.0f);
  EXPECT_EQ(p3[23][2], 1.0f);
  EXPECT_NEAR(p3[1][0], 1.0f / 3, 1e-7);
  const auto single = hx::point_cloud<double, 1>::grid({1});
  ASSERT_EQ(single.size(), 1);
  EXPECT_EQ(single[0][0], 0.5);
  const auto line = hx::point_cloud<double, 2>::grid({1, 3});
  EXPECT_EQ(line[2][0], 0.5);
  EXPECT_EQ(line[2][1], 1.0);
}

TEST(point_cloud, perturbation_is_bounded_and_reproducible) {
  const auto exact = hx::point_cloud<double, 3>::grid({5, 6, 7});
  const auto a = hx::point_cloud<double, 3>::grid({5, 6, 7}, 0.3, 7);
  const auto b = hx::point_cloud<double, 3>::grid({5, 6, 7}, 0.3, 7);
  const auto c = hx::point_cloud<double, 3>::grid({5, 6, 7}, 0.3, 8);
  const std::array<double, 3> h{1.0 / 4, 1.0 / 5, 1.0 / 6};
  bool moved = false, differs = false;
  for (int i = 0; i < a.size(); ++i)
    for (int k = 0; k < 3; ++k) {
      const double d = a[i][k] - exact[i][k];
      EXPECT_GE(d, -0.15 * h[k] - 1e-15);
      EXPECT_LT(d, 0.15 * h[k] + 1e-15);
      moved |= d != 0;
      EXPECT_EQ(a[i][k], b[i][k]);
      differs |= a[i][k] != c[i][k];
    }
  EXPECT_TRUE(moved);
  EXPECT_TRUE(differs);
}

TEST(point_cloud, clustered_is_reproducible_and_finite) {
  const auto a = hx::point_cloud<double, 2>::clustered(1000, 3);
  const auto b = hx::point_cloud<double, 2>::clustered(1000, 3);
  ASSERT_EQ(a.size(), 1000);
  EXPECT_EQ(a.coords(), b.coords());
  EXPECT_EQ((hx::point_cloud<float, 3>::clustered(17, 1).size()), 17);
}

TEST(point_cloud, bad_inputs_throw) {
  using pc2 = hx::point_cloud<double, 2>;
  EXPECT_THROW(pc2(std::vector<std::array<double, 2>>{}), hx::invalid_argument);
  EXPECT_THROW(pc2({{0.0, std::numeric_limits<double>::quiet_NaN()}}), hx::non_finite_value);
  EXPECT_THROW(pc2({{0.0, 1.0}, {std::numeric_limits<double>::infinity(), 0.0}}), hx::non_finite_value);
  EXPECT_THROW(pc2::grid({0, 4}), hx::invalid_argument);
  EXPECT_THROW(pc2::grid({4, -1}), hx::invalid_argument);
  EXPECT_THROW(pc2::grid({4, 4}, -0.1), hx::invalid_argument);
  EXPECT_THROW(pc2::grid({4, 4}, std::numeric_limits<double>::quiet_NaN()), hx::invalid_argument);
  EXPECT_THROW(pc2::clustered(0, 1), hx::invalid_argument);
  EXPECT_NO_THROW(pc2({{0.25, 0.75}}));
}

// ---------------------------------------------------------------------------------------------
// KD-tree

TEST(kd_tree, uniform_1d_2d_3d) {
  check_kd_tree<double, 1>(hx::point_cloud<double, 1>::grid({1000}).coords(), 16);
  check_kd_tree<double, 2>(hx::point_cloud<double, 2>::grid({50, 40}, 0.2, 1).coords(), 32);
  check_kd_tree<double, 2>(hx::point_cloud<double, 2>::grid({64, 64}).coords(), 64);
  check_kd_tree<double, 3>(hx::point_cloud<double, 3>::grid({12, 12, 12}).coords(), 20);
  check_kd_tree<float, 3>(hx::point_cloud<float, 3>::grid({9, 10, 11}, 0.5f, 2).coords(), 7);
  check_kd_tree<double, 3>(random_points<3>(777, 5), 10);
}

TEST(kd_tree, elongated_domain_splits_the_long_axis) {
  // 64 x 4 grid stretched: the first splits are along x
  std::vector<std::array<double, 2>> pts;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 64; ++i) pts.push_back({i * 1.0, j * 0.1});
  const auto tree = hx::detail::build_kd_tree<double, 2>(pts, 8);
  const auto left = node_box(tree, pts, 1), right = node_box(tree, pts, 2);
  EXPECT_LE(left.hi[0], right.lo[0]);
  EXPECT_EQ(left.lo[1], 0.0);
  EXPECT_NEAR(left.hi[1], 0.3, 1e-15);
  check_kd_tree<double, 2>(pts, 8);
}

TEST(kd_tree, clustered) {
  check_kd_tree<double, 2>(hx::point_cloud<double, 2>::clustered(3000, 11).coords(), 64);
  check_kd_tree<double, 3>(hx::point_cloud<double, 3>::clustered(2500, 12).coords(), 30);
  check_kd_tree<double, 1>(hx::point_cloud<double, 1>::clustered(500, 13).coords(), 5);
}

TEST(kd_tree, duplicate_points) {
  auto pts = random_points<2>(300, 3);
  for (int i = 0; i < 200; ++i) pts.push_back({0.3, 0.3});
  std::shuffle(pts.begin(), pts.end(), std::mt19937_64(4));
  check_kd_tree<double, 2>(pts, 8);
  // all points identical: the split is by rank, so the tree is still balanced
  std::vector<std::array<double, 3>> same(100, {0.5, 0.5, 0.5});
  check_kd_tree<double, 3>(same, 8);
  const auto tree = hx::detail::build_kd_tree<double, 3>(same, 8);
  EXPECT_EQ(tree.depth, 4);
  EXPECT_EQ(tree.max_leaf_size, 7);
}

TEST(kd_tree, tiny_sets) {
  // n < leaf_size: depth 0, one leaf
  const auto few = random_points<2>(10, 1);
  check_kd_tree<double, 2>(few, 64);
  EXPECT_EQ((hx::detail::build_kd_tree<double, 2>(few, 64).depth), 0);
  EXPECT_EQ((hx::detail::build_kd_tree<double, 2>(few, 10).depth), 0);
  EXPECT_EQ((hx::detail::build_kd_tree<double, 2>(few, 9).depth), 1);
  // n = 1
  const std::vector<std::array<double, 3>> one{{0.1, 0.2, 0.3}};
  check_kd_tree<double, 3>(one, 1);
  EXPECT_EQ((hx::detail::build_kd_tree<double, 3>(one, 1).depth), 0);
  // n = 3, leaf 1: depth 2, one leaf empty
  const std::vector<std::array<double, 1>> three{{0.9}, {0.1}, {0.5}};
  check_kd_tree<double, 1>(three, 1);
  const auto tree = hx::detail::build_kd_tree<double, 1>(three, 1);
  EXPECT_EQ(tree.depth, 2);
  int empty = 0;
  for (int leaf = 3; leaf < 7; ++leaf) empty += tree.empty(leaf);
  EXPECT_EQ(empty, 1);
  // n = 5, leaf 1: depth 3, 3 empty leaves
  check_kd_tree<double, 2>(random_points<2>(5, 9), 1);
  EXPECT_THROW((hx::detail::build_kd_tree<double, 2>({}, 4)), hx::invalid_argument);
  EXPECT_THROW((hx::detail::build_kd_tree<double, 2>(few, 0)), hx::invalid_argument);
}

TEST(index_tree, balanced_ranges) {
  for (int n : {1, 2, 3, 7, 64, 65, 1000, 1023, 1025}) {
    for (int leaf : {1, 3, 16, 64}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", leaf = " + std::to_string(leaf));
      const auto tree = hx::detail::build_index_tree(n, leaf);
      check_index_ranges(tree, n, leaf);
      EXPECT_EQ(tree.dim, 0);
      for (int p = 0; p < n; ++p) ASSERT_EQ(tree.perm[p], p);
    }
  }
  EXPECT_THROW(hx::detail::build_index_tree(0, 4), hx::invalid_argument);
  EXPECT_THROW(hx::detail::build_index_tree(10, 0), hx::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Matrix tree

TEST(matrix_tree, tiles_the_matrix_and_respects_admissibility_2d) {
  const auto grid = hx::point_cloud<double, 2>::grid({40, 40});
  for (double eta : {0.5, 0.9, 1.0, 2.0}) check_structure(grid, {.leaf_size = 32, .eta = eta});
  check_structure(hx::point_cloud<double, 2>::grid({30, 50}, 0.4, 3), {.leaf_size = 16, .eta = 1.0});
}

TEST(matrix_tree, tiles_the_matrix_and_respects_admissibility_1d_3d) {
  check_structure(hx::point_cloud<double, 1>::grid({1000}), {.leaf_size = 16, .eta = 0.5});
  check_structure(hx::point_cloud<double, 1>::grid({700}, 0.9, 1), {.leaf_size = 5, .eta = 1.0});
  check_structure(hx::point_cloud<double, 3>::grid({11, 11, 11}), {.leaf_size = 20, .eta = 1.0});
  check_structure(hx::point_cloud<float, 3>::grid({10, 12, 9}, 0.3f, 4), {.leaf_size = 32, .eta = 0.8});
}

TEST(matrix_tree, clustered_and_duplicate_points) {
  check_structure(hx::point_cloud<double, 2>::clustered(1500, 21), {.leaf_size = 32, .eta = 0.9});
  check_structure(hx::point_cloud<double, 3>::clustered(1200, 22), {.leaf_size = 16, .eta = 1.5});
  auto pts = random_points<2>(300, 3);
  for (int i = 0; i < 200; ++i) pts.push_back({0.3, 0.3});
  check_structure(hx::point_cloud<double, 2>(pts), {.leaf_size = 8, .eta = 1.0});
  // coincident points are never a far field, even with zero-size boxes
  check_structure(hx::point_cloud<double, 2>(std::vector<std::array<double, 2>>(100, {0.5, 0.5})),
                  {.leaf_size = 8, .eta = 1.0});
}

TEST(matrix_tree, tiny_sets) {
  check_structure(hx::point_cloud<double, 1>({{0.9}, {0.1}, {0.5}}), {.leaf_size = 1, .eta = 1.0});
  check_structure(hx::point_cloud<double, 2>(random_points<2>(5, 2)), {.leaf_size = 1, .eta = 1.0});
  check_structure(hx::point_cloud<double, 2>({{0.1, 0.2}}), {.leaf_size = 1, .eta = 1.0});
  const auto s = hx::structure<double>::from_points(hx::point_cloud<double, 2>(random_points<2>(10, 1)));
  EXPECT_EQ(s.depth(), 0);
  EXPECT_EQ(s.dense_blocks(), 1);
  EXPECT_EQ(s.low_rank_blocks_per_level(), std::vector<int>{0});
}

TEST(matrix_tree, weak_admissibility_is_hodlr) {
  auto check_hodlr = [](const hx::structure<double>& s) {
    const auto& mt = s.blocks();
    EXPECT_EQ(mt.coupling[0].blocks(), 0);
    for (int l = 1; l <= s.depth(); ++l) {
      const auto& lvl = mt.coupling[l];
      EXPECT_EQ(lvl.blocks(), cluster_tree::level_size(l)) << "level " << l;
      for (int t = 0; t < cluster_tree::level_size(l); ++t) {
        ASSERT_EQ(lvl.row_ptr[t + 1] - lvl.row_ptr[t], 1);
        EXPECT_EQ(lvl.col[lvl.row_ptr[t]], t ^ 1) << "the sibling block";
      }
    }
    EXPECT_EQ(mt.dense.blocks(), cluster_tree::level_size(s.depth()));
    for (int t = 0; t < mt.dense.level_size(); ++t) {
      ASSERT_EQ(mt.dense.row_ptr[t + 1] - mt.dense.row_ptr[t], 1);
      EXPECT_EQ(mt.dense.col[mt.dense.row_ptr[t]], t);
    }
  };
  const auto w = hx::structure<double>::weak(1000, 30);
  EXPECT_EQ(w.rows(), 1000);
  EXPECT_EQ(w.cols(), 1000);
  EXPECT_EQ(w.depth(), 6);
  EXPECT_EQ(w.dimension(), 0);
  EXPECT_TRUE(w.tree_points().empty());
  EXPECT_TRUE(w.options().weak_admissibility);
  EXPECT_EQ(w.options().leaf_size, 30);
  check_matrix_tree<double, 1>(w, nullptr);
  check_hodlr(w);
  const auto pw = hx::point_cloud<double, 2>::grid({30, 30});
  const auto ws = hx::structure<double>::from_points(pw, {.leaf_size = 16, .weak_admissibility = true});
  check_matrix_tree<double, 2>(ws, &pw.coords());
  check_hodlr(ws);
}

TEST(matrix_tree, bad_inputs_throw) {
  const auto pc = hx::point_cloud<double, 2>::grid({10, 10});
  EXPECT_THROW(hx::structure<double>::from_points(pc, {.eta = 0}), hx::invalid_argument);
  EXPECT_THROW(hx::structure<double>::from_points(pc, {.eta = -0.5}), hx::invalid_argument);
  EXPECT_THROW(hx::structure<double>::from_points(pc, {.leaf_size = 0}), hx::invalid_argument);
  EXPECT_THROW(hx::structure<double>::from_points(pc, {.cheb_points = 0}), hx::invalid_argument);
  EXPECT_THROW(hx::structure<double>::weak(0, 8), hx::invalid_argument);
  EXPECT_THROW(hx::structure<double>::weak(-5, 8), hx::invalid_argument);
  EXPECT_THROW(hx::structure<double>::weak(100, 0), hx::invalid_argument);
  // index trees carry no geometry: general admissibility is refused
  const auto it = hx::detail::build_index_tree(100, 8);
  EXPECT_THROW(hx::detail::build_matrix_tree(it, it, 1.0, false), hx::invalid_argument);
  EXPECT_NO_THROW(hx::detail::build_matrix_tree(it, it, 1.0, true));
  // trees of different depths do not pair
  const auto shallow = hx::detail::build_index_tree(100, 64);
  EXPECT_THROW(hx::detail::build_matrix_tree(it, shallow, 1.0, true), hx::invalid_argument);
}

TEST(structure, handles_share_and_empty_handles_throw) {
  const auto s = hx::structure<float>::from_points(hx::point_cloud<float, 2>::grid({20, 20}), {.leaf_size = 16});
  const auto copy = s;
  EXPECT_TRUE(copy == s);
  EXPECT_EQ(&copy.blocks(), &s.blocks());
  EXPECT_TRUE(s.symmetric_trees());
  EXPECT_EQ(s.options().leaf_size, 16);
  EXPECT_FALSE(s.empty());
  hx::structure<double> none;
  EXPECT_TRUE(none.empty());
  EXPECT_THROW((void)none.rows(), hx::missing_structure);
  EXPECT_THROW((void)none.blocks(), hx::missing_structure);
}

// ---------------------------------------------------------------------------------------------
// The TARGETS.md problems: build time and block counts, printed (no assertion on time).

TEST(structure, targets_problems) {
  auto report = [](const char* name, auto build) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto s = build();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: n = %lld, depth %d, %.3f s\n  low-rank blocks per level:", name, (long long)s.rows(), s.depth(),
                seconds);
    for (int c : s.low_rank_blocks_per_level()) std::printf(" %d", c);
    std::printf("\n  dense blocks: %d, max low-rank blocks per row:", s.dense_blocks());
    for (const auto& lvl : s.blocks().coupling) std::printf(" %d", lvl.max_blocks_per_row());
    std::printf("\n");
    return s;
  };
  const auto s2 = report("2D 256 x 256, leaf 64, eta 1", [] {
    return hx::structure<double>::from_points(hx::point_cloud<double, 2>::grid({256, 256}), {.leaf_size = 64, .eta = 1.0});
  });
  EXPECT_EQ(s2.rows(), 65536);
  EXPECT_EQ(s2.depth(), 10);
  EXPECT_EQ(s2.row_tree().max_leaf_size, 64);
  const auto s3 = report("3D 40 x 40 x 40, leaf 64, eta 1", [] {
    return hx::structure<double>::from_points(hx::point_cloud<double, 3>::grid({40, 40, 40}),
                                              {.leaf_size = 64, .eta = 1.0, .cheb_points = 4});
  });
  EXPECT_EQ(s3.rows(), 64000);
  EXPECT_EQ(s3.depth(), 10);
}
