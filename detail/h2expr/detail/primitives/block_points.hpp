#pragma once
// The layout of kernel entries of many blocks (dense leaves: point sets of leaves; coupling matrices:
// interpolation points of clusters), and their evaluation by the host's cores, which both spaces use
// (the CUDA space for kernels that cannot run on the device).
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

// Which points the blocks of one batch are made of. Node j's points are points[(j * stride + i) * D + d]
// for i < count[j]; block b is rows of node row_node[b] times columns of node col_node[b], stored
// column-major row_stride x col_stride (entries beyond the counts are zero: padding).
template <class T>
struct block_points {
  std::vector<int> row_node, col_node;
  std::vector<T> row_points, col_points;
  std::vector<int> row_count, col_count;
  int row_stride = 0, col_stride = 0;
  int blocks() const { return int(row_node.size()); }
};

template <class T, int D, class Kernel>
void evaluate_block(const Kernel& kernel, const block_points<T>& p, int b, T* out) {
  const int rn = p.row_node[b], cn = p.col_node[b];
  const int m = p.row_count[rn], n = p.col_count[cn];
  std::array<T, D> x, y;
  for (int j = 0; j < p.col_stride; ++j)
    for (int i = 0; i < p.row_stride; ++i) {
      T v = T(0);
      if (i < m && j < n) {
        for (int d = 0; d < D; ++d) {
          x[d] = p.row_points[(std::size_t(rn) * p.row_stride + i) * D + d];
          y[d] = p.col_points[(std::size_t(cn) * p.col_stride + j) * D + d];
        }
        v = kernel(x, y);
      }
      out[i + std::size_t(j) * p.row_stride] = v;
    }
}

// All blocks into out (block b at out + b * row_stride * col_stride), on the calling thread's OpenMP team.
template <class T, int D, class Kernel>
void evaluate_blocks_into(const Kernel& kernel, const block_points<T>& p, T* out) {
  const std::size_t size = std::size_t(p.row_stride) * p.col_stride;
#pragma omp parallel for schedule(dynamic, 8)
  for (int b = 0; b < p.blocks(); ++b) evaluate_block<T, D>(kernel, p, b, out + b * size);
}

}  // namespace h2expr::detail
