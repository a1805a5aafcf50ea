#pragma once
// Column-wise operations on blocks of vectors in a space, for solvers that run one recurrence per
// right-hand side (Krylov methods, Newton-Schulz probes): dot products x_j^T y_j and updates
// y_j += s_j x_j, each one strided batch of gemms (1 x 1 and n x 1 items), so both spaces share them.
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/core/view.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
void require_blas_sizes(const_view<T, Space> x, const char* what) {
  require(x.rows() <= INT_MAX && x.cols() <= INT_MAX && x.ld() <= INT_MAX,
          std::string(what) + ": blocks past the 32-bit integers of BLAS");
}

// x_j^T y_j for every column j, on the host in double.
template <class T, class Space>
std::vector<double> column_dots(const context_ptr<Space>& ctx, const_view<T, Space> x, const_view<T, Space> y) {
  const int cols = int(x.cols());
  std::vector<double> out(std::size_t(cols), 0.0);
  if (cols == 0 || x.rows() == 0) return out;
  auto& c = *ctx;
  buffer<T, Space> d(ctx, std::size_t(cols));
  gemm_strided_batched(c, op::transpose, op::none, 1, 1, int(x.rows()), T(1), x.data(), int(x.ld()), x.ld(), y.data(),
                       int(y.ld()), y.ld(), T(0), d.data(), 1, 1, cols);
  std::vector<T> h(static_cast<std::size_t>(cols));
  download_2d(c, std::size_t(cols), 1, d.data(), std::size_t(cols), h.data(), std::size_t(cols));
  for (int j = 0; j < cols; ++j) out[j] = double(h[j]);
  return out;
}

// y_j += s_j x_j for every column j.
template <class T, class Space>
void column_axpy(const context_ptr<Space>& ctx, const std::vector<T>& s, const_view<T, Space> x, view<T, Space> y) {
  const int cols = int(x.cols());
  if (cols == 0 || x.rows() == 0) return;
  auto& c = *ctx;
  buffer<T, Space> d(ctx, s);
  gemm_strided_batched(c, op::none, op::none, int(x.rows()), 1, 1, T(1), x.data(), int(x.ld()), x.ld(), d.data(), 1,
                       1, T(1), y.data(), int(y.ld()), y.ld(), cols);
}

// The Euclidean norms of the columns, in double.
template <class T, class Space>
std::vector<double> column_norms(const context_ptr<Space>& ctx, const_view<T, Space> x) {
  auto d = column_dots(ctx, x, x);
  for (auto& v : d) v = std::sqrt(std::max(v, 0.0));
  return d;
}

}  // namespace h2expr::detail
