#pragma once
// The blocks of a kernel matrix's H2 representation (Chebyshev interpolation), for any list of
// blocks: h2_matrix::from_kernel asks for all of them, a distributed matrix for its block rows.
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/primitives/block_points.hpp>
#include <h2expr/detail/structure/chebyshev.hpp>
#include <h2expr/detail/structure/cluster_tree.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace h2expr::detail {

// The rank of Chebyshev interpolation with p points in each of D dimensions, checked.
inline int interpolation_rank(int p, int D) {
  double k = 1;
  for (int i = 0; i < D; ++i) k *= p;
  require(k <= 4096, "cheb_points^D = " + std::to_string(k) + " is too large a rank");
  return int(k);
}

// The coupling blocks (row_node[i], col_node[i]) of level l, k x k each in list order: kernel values
// between the interpolation points of the two clusters.
template <class T, int D, class Space, class Kernel>
buffer<T, Space> kernel_coupling_blocks(const context_ptr<Space>& ctx, const Kernel& kernel, const chebyshev_boxes& boxes,
                                        int l, std::vector<int> row_node, std::vector<int> col_node) {
  const int k = boxes.k;
  block_points<T> bp;
  bp.row_node = std::move(row_node), bp.col_node = std::move(col_node);
  buffer<T, Space> out(ctx, std::size_t(bp.blocks()) * k * k);
  if (bp.blocks() == 0) return out;
  bp.row_points = chebyshev_level_points<T>(boxes, l);
  bp.col_points = bp.row_points;
  bp.row_count.assign(std::size_t(1) << l, k);
  bp.col_count = bp.row_count;
  bp.row_stride = bp.col_stride = k;
  evaluate_blocks<T, D>(*ctx, kernel, bp, out.data());
  require<non_finite_value>(all_finite(*ctx, out.data(), out.size()),
                            "the kernel returned NaN or infinity (coupling block, level " + std::to_string(l) + ")");
  return out;
}

// The dense blocks (row_leaf[i], col_leaf[i]): kernel values between the points of two leaves, padded
// to m_max x m_max, in list order. tree_points: the points in tree order, D values each.
template <class T, int D, class Space, class Kernel>
buffer<T, Space> kernel_dense_blocks(const context_ptr<Space>& ctx, const Kernel& kernel, const cluster_tree& tree,
                                     const std::vector<T>& tree_points, int m_max, std::vector<int> row_leaf,
                                     std::vector<int> col_leaf) {
  const int L = tree.depth, first = cluster_tree::level_begin(L), leaves = cluster_tree::level_size(L);
  block_points<T> bp;
  bp.row_node = std::move(row_leaf), bp.col_node = std::move(col_leaf);
  buffer<T, Space> out(ctx, std::size_t(bp.blocks()) * m_max * m_max);
  if (bp.blocks() == 0) return out;
  bp.row_points.assign(std::size_t(leaves) * m_max * D, T(0));
  bp.row_count.resize(leaves);
  for (int t = 0; t < leaves; ++t) {
    const int b0 = tree.begin[first + t], size = tree.end[first + t] - b0;
    bp.row_count[t] = size;
    std::copy_n(tree_points.begin() + std::size_t(b0) * D, std::size_t(size) * D,
                bp.row_points.begin() + std::size_t(t) * m_max * D);
  }
  bp.col_points = bp.row_points;
  bp.col_count = bp.row_count;
  bp.row_stride = bp.col_stride = m_max;
  evaluate_blocks<T, D>(*ctx, kernel, bp, out.data());
  require<non_finite_value>(all_finite(*ctx, out.data(), out.size()), "the kernel returned NaN or infinity (dense block)");
  return out;
}

}  // namespace h2expr::detail
