#pragma once
// Kernel entries of many blocks at once, on the host: dense leaves (point sets of leaves) and
// coupling matrices (interpolation points of clusters).
#include <h2expr/detail/host/context.hpp>

#include <array>
#include <cmath>
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

template <class T, int D, class Kernel>
void evaluate_blocks(context<host>&, const Kernel& kernel, const block_points<T>& p, T* out) {
  const std::size_t size = std::size_t(p.row_stride) * p.col_stride;
#pragma omp parallel for schedule(dynamic, 8)
  for (int b = 0; b < p.blocks(); ++b) evaluate_block<T, D>(kernel, p, b, out + b * size);
}

template <class T>
bool all_finite(context<host>&, const T* data, std::size_t n) {
  bool ok = true;
#pragma omp parallel for reduction(&& : ok) schedule(static)
  for (std::int64_t i = 0; i < std::int64_t(n); ++i) ok = ok && std::isfinite(data[i]);
  return ok;
}

// The sum of the squares of the entries, in double (NaN or infinite when an entry is).
template <class T>
double sum_of_squares(context<host>&, const T* data, std::size_t n) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::int64_t i = 0; i < std::int64_t(n); ++i) sum += double(data[i]) * double(data[i]);
  return sum;
}

}  // namespace h2expr::detail
