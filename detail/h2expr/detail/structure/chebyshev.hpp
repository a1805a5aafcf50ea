#pragma once
// Chebyshev interpolation on the clusters of a tree: the nested bases of a kernel matrix.
// For a cluster box, p Chebyshev points per dimension give k = p^D interpolation points xi_nu
// (first dimension fastest) and Lagrange polynomials L_nu. Then
//   leaf basis   U_t(i, nu)      = L^t_nu(x_i)
//   transfer     E_c(nu', nu)    = L^t_nu(xi^c_nu')   for a child c of t (exact: U_t = U_c E_c on c)
//   coupling     S_ts(nu, mu)    = k(xi^t_nu, xi^s_mu)
// Computed on the host in double (O(n k) work), stored in T.
#include <h2expr/detail/structure/cluster_tree.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace h2expr::detail {

struct chebyshev_boxes {
  int p = 0, dim = 0, k = 0;
  std::vector<double> lo, hi;  // per node, dim values: the interpolation box (never degenerate)
};

// Boxes of the tree's clusters, widened where a cluster is flat in some direction (duplicate points,
// points on a line), so that the interpolation points stay distinct.
inline chebyshev_boxes make_chebyshev_boxes(const cluster_tree& tree, int p) {
  chebyshev_boxes b;
  b.p = p, b.dim = tree.dim;
  b.k = 1;
  for (int d = 0; d < tree.dim; ++d) b.k *= p;
  const int nodes = int(tree.begin.size());
  b.lo.assign(std::size_t(nodes) * tree.dim, 0.0);
  b.hi.assign(std::size_t(nodes) * tree.dim, 0.0);
  double root_width = 0;
  for (int d = 0; d < tree.dim; ++d) root_width = std::max(root_width, tree.box_max[d] - tree.box_min[d]);
  const double min_width = root_width > 0 ? 1e-8 * root_width : 1e-8;
  for (int t = 0; t < nodes; ++t)
    for (int d = 0; d < tree.dim; ++d) {
      const std::size_t i = std::size_t(t) * tree.dim + d;
      double lo = tree.box_min[i], hi = tree.box_max[i];
      if (!(hi >= lo)) lo = hi = 0;  // empty cluster
      if (hi - lo < min_width) {
        const double c = 0.5 * (lo + hi);
        lo = c - 0.5 * min_width, hi = c + 0.5 * min_width;
      }
      b.lo[i] = lo, b.hi[i] = hi;
    }
  return b;
}

// The p Chebyshev points of [lo, hi].
inline void chebyshev_points_1d(int p, double lo, double hi, double* out) {
  for (int j = 0; j < p; ++j)
    out[j] = 0.5 * (lo + hi) + 0.5 * (hi - lo) * std::cos((2 * j + 1) * std::numbers::pi / (2.0 * p));
}

// Values of the p Lagrange polynomials of the points xi at x.
inline void lagrange_1d(int p, const double* xi, double x, double* out) {
  for (int j = 0; j < p; ++j) {
    double v = 1;
    for (int m = 0; m < p; ++m)
      if (m != j) v *= (x - xi[m]) / (xi[j] - xi[m]);
    out[j] = v;
  }
}

// Tensor-product values: out[nu] = prod_d L_{nu_d}(x_d), first dimension fastest.
inline void lagrange_tensor(const chebyshev_boxes& b, int node, const double* x, double* out) {
  std::vector<double> xi(b.p), val(std::size_t(b.p) * b.dim);
  for (int d = 0; d < b.dim; ++d) {
    const std::size_t i = std::size_t(node) * b.dim + d;
    chebyshev_points_1d(b.p, b.lo[i], b.hi[i], xi.data());
    lagrange_1d(b.p, xi.data(), x[d], val.data() + std::size_t(d) * b.p);
  }
  for (int nu = 0; nu < b.k; ++nu) {
    double v = 1;
    for (int d = 0, r = nu; d < b.dim; ++d, r /= b.p) v *= val[std::size_t(d) * b.p + r % b.p];
    out[nu] = v;
  }
}

// The k interpolation points of a node: out[nu * dim + d].
inline void chebyshev_points(const chebyshev_boxes& b, int node, double* out) {
  std::vector<double> xi(std::size_t(b.p) * b.dim);
  for (int d = 0; d < b.dim; ++d) {
    const std::size_t i = std::size_t(node) * b.dim + d;
    chebyshev_points_1d(b.p, b.lo[i], b.hi[i], xi.data() + std::size_t(d) * b.p);
  }
  for (int nu = 0; nu < b.k; ++nu)
    for (int d = 0, r = nu; d < b.dim; ++d, r /= b.p) out[std::size_t(nu) * b.dim + d] = xi[std::size_t(d) * b.p + r % b.p];
}

// Leaf bases, padded to m_max rows per leaf (zero rows beyond the leaf's points): the layout the
// upsweep reads as one strided batch. points: tree order, dim values each.
template <class T>
std::vector<T> chebyshev_leaf_bases(const cluster_tree& tree, const chebyshev_boxes& b, const std::vector<T>& points,
                                    int m_max) {
  const int first = cluster_tree::level_begin(tree.depth), leaves = cluster_tree::level_size(tree.depth);
  std::vector<T> out(std::size_t(leaves) * m_max * b.k, T(0));
#pragma omp parallel
  {
    std::vector<double> x(b.dim), v(b.k);
#pragma omp for schedule(static)
    for (int l = 0; l < leaves; ++l) {
      const int node = first + l;
      T* u = out.data() + std::size_t(l) * m_max * b.k;
      for (int i = 0; i < tree.end[node] - tree.begin[node]; ++i) {
        for (int d = 0; d < b.dim; ++d) x[d] = double(points[std::size_t(tree.begin[node] + i) * b.dim + d]);
        lagrange_tensor(b, node, x.data(), v.data());
        for (int nu = 0; nu < b.k; ++nu) u[i + std::size_t(nu) * m_max] = T(v[nu]);
      }
    }
  }
  return out;
}

// Transfer matrices into level l - 1 from level l, stacked per parent: for parent j (local index),
// the 2k x k block [E_{2j}; E_{2j+1}] at offset j * 2k * k, column-major.
template <class T>
std::vector<T> chebyshev_transfers(const chebyshev_boxes& b, int level) {
  const int parents = cluster_tree::level_size(level - 1), k = b.k;
  std::vector<T> out(std::size_t(parents) * 2 * k * k);
#pragma omp parallel
  {
    std::vector<double> xi(std::size_t(k) * b.dim), v(k);
#pragma omp for schedule(static)
    for (int j = 0; j < parents; ++j) {
      const int parent = cluster_tree::level_begin(level - 1) + j;
      for (int h = 0; h < 2; ++h) {
        const int child = 2 * parent + 1 + h;
        chebyshev_points(b, child, xi.data());
        for (int r = 0; r < k; ++r) {  // row r: the child's interpolation point r
          lagrange_tensor(b, parent, xi.data() + std::size_t(r) * b.dim, v.data());
          for (int nu = 0; nu < k; ++nu) out[std::size_t(j) * 2 * k * k + std::size_t(nu) * 2 * k + h * k + r] = T(v[nu]);
        }
      }
    }
  }
  return out;
}

// Interpolation points of every node of a level: out[(local node * k + nu) * dim + d].
template <class T>
std::vector<T> chebyshev_level_points(const chebyshev_boxes& b, int level) {
  const int nodes = cluster_tree::level_size(level);
  std::vector<T> out(std::size_t(nodes) * b.k * b.dim);
  std::vector<double> xi(std::size_t(b.k) * b.dim);
  for (int j = 0; j < nodes; ++j) {
    chebyshev_points(b, cluster_tree::level_begin(level) + j, xi.data());
    for (std::size_t i = 0; i < xi.size(); ++i) out[std::size_t(j) * b.k * b.dim + i] = T(xi[i]);
  }
  return out;
}

}  // namespace h2expr::detail
