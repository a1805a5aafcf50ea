#pragma once
// matrix<T, Space>: a column-major dense block of vectors that owns its storage in a space.
// Deep copies, cheap moves; views for sub-blocks; conversion from and to Eigen on the host.
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/view.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace h2expr {

template <class T, class Space = host>
class matrix : public detail::values_in_space<T, Space> {
 public:
  matrix() = default;
  // rows x cols of zeros.
  matrix(index rows, index cols, ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : storage_(std::move(ctx), checked_size(rows, cols)), rows_(rows), cols_(cols) {
    if (!storage_.empty()) detail::fill(*storage_.context(), storage_.data(), storage_.size(), T(0));
  }
  // A copy of any Eigen dense expression (evaluated on the host, then moved to the space).
  template <class Derived>
  explicit matrix(const Eigen::DenseBase<Derived>& m, ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : matrix(uninitialized(m.rows(), m.cols(), std::move(ctx))) {
    const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> host_copy = m.derived().template cast<T>();
    if (size()) detail::upload_2d(context(), rows_, cols_, host_copy.data(), rows_, data(), ld());
  }
  // A deep copy of a view's block.
  explicit matrix(::h2expr::const_view<T, Space> v, ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : matrix(uninitialized(v.rows(), v.cols(), std::move(ctx))) {
    if (size()) detail::copy_2d(context(), rows_, cols_, v.data(), v.ld(), data(), ld());
  }

  // Entries drawn independently from the standard normal distribution, reproducible from the seed.
  static matrix random(index rows, index cols, std::uint64_t seed, ::h2expr::context_ptr<Space> ctx = default_context<Space>()) {
    return filled(detail::distribution::normal, rows, cols, seed, std::move(ctx));
  }
  // Entries uniform in [0, 1), reproducible from the seed.
  static matrix uniform(index rows, index cols, std::uint64_t seed, ::h2expr::context_ptr<Space> ctx = default_context<Space>()) {
    return filled(detail::distribution::uniform, rows, cols, seed, std::move(ctx));
  }
  // rows x cols with unspecified entries, for outputs that are about to be overwritten.
  static matrix uninitialized(index rows, index cols, ::h2expr::context_ptr<Space> ctx = default_context<Space>()) {
    matrix m;
    m.storage_ = detail::buffer<T, Space>(std::move(ctx), checked_size(rows, cols));
    m.rows_ = rows;
    m.cols_ = cols;
    return m;
  }

  matrix(const matrix& o) : matrix(uninitialized(o.rows_, o.cols_, o.context_ptr())) {
    if (size()) detail::copy(context(), o.data(), data(), size());
  }
  matrix& operator=(const matrix& o) {
    if (this != &o) *this = matrix(o);
    return *this;
  }
  matrix(matrix&& o) noexcept
      : storage_(std::move(o.storage_)), rows_(std::exchange(o.rows_, 0)), cols_(std::exchange(o.cols_, 0)) {}
  matrix& operator=(matrix&& o) noexcept {
    storage_ = std::move(o.storage_);
    rows_ = std::exchange(o.rows_, 0);
    cols_ = std::exchange(o.cols_, 0);
    return *this;
  }

  index rows() const { return rows_; }
  index cols() const { return cols_; }
  index ld() const { return rows_; }
  index size() const { return rows_ * cols_; }
  T* data() { return storage_.data(); }
  const T* data() const { return storage_.data(); }
  // The context the storage lives in (a default one for an empty matrix).
  ::h2expr::context<Space>& context() const { return *context_ptr(); }
  ::h2expr::context_ptr<Space> context_ptr() const {
    return storage_.context() ? storage_.context() : default_context<Space>();
  }

  ::h2expr::view<T, Space> view() { return {data(), rows_, cols_, rows_, storage_.context().get()}; }
  ::h2expr::const_view<T, Space> view() const { return {data(), rows_, cols_, rows_, storage_.context().get()}; }
  ::h2expr::const_view<T, Space> const_view() const { return view(); }
  operator ::h2expr::view<T, Space>() { return view(); }
  operator ::h2expr::const_view<T, Space>() const { return view(); }
  ::h2expr::view<T, Space> block(index i, index j, index r, index c) { return view().block(i, j, r, c); }
  ::h2expr::const_view<T, Space> block(index i, index j, index r, index c) const { return view().block(i, j, r, c); }
  ::h2expr::view<T, Space> columns(index j, index c) { return view().columns(j, c); }
  ::h2expr::const_view<T, Space> columns(index j, index c) const { return view().columns(j, c); }

 private:
  // rows * cols entries, when they and their bytes can be counted (a wrapped count would allocate
  // too little and the fill would run past it).
  static std::size_t checked_size(index rows, index cols) {
    detail::require(rows >= 0 && cols >= 0, "matrix size must not be negative (got " + std::to_string(rows) +
                                                " x " + std::to_string(cols) + ")");
    detail::require(cols == 0 || std::size_t(rows) <= detail::max_elements<T>() / std::size_t(cols),
                    "matrix of " + std::to_string(rows) + " x " + std::to_string(cols) +
                        ": more bytes than memory can address");
    return std::size_t(rows) * std::size_t(cols);
  }
  static matrix filled(detail::distribution d, index rows, index cols, std::uint64_t seed, ::h2expr::context_ptr<Space> ctx) {
    matrix m = uninitialized(rows, cols, std::move(ctx));
    if (m.size()) detail::fill_random(m.context(), d, rows, cols, m.data(), rows, seed);
    return m;
  }

  detail::buffer<T, Space> storage_;
  index rows_ = 0, cols_ = 0;
};

// A host copy of a space's block, as an Eigen matrix.
template <class T, class Space>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> to_dense(const_view<T, Space> v) {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> out(v.rows(), v.cols());
  if (v.rows() && v.cols()) {
    if constexpr (detail::space_traits<Space>::host_memory) {  // a host view may come without a context
      context<host> c;
      detail::download_2d(c, v.rows(), v.cols(), v.data(), v.ld(), out.data(), v.rows());
    } else {
      detail::require(v.context() != nullptr, "to_dense of a CUDA view needs the view's context");
      detail::download_2d(*v.context(), v.rows(), v.cols(), v.data(), v.ld(), out.data(), v.rows());
    }
  }
  return out;
}
template <class T, class Space>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> to_dense(view<T, Space> v) {
  return to_dense(const_view<T, Space>(v));
}
template <class T, class Space>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> to_dense(const matrix<T, Space>& m) {
  return to_dense(m.view());
}

namespace detail {

// The dense rows x cols matrix of an operator, on the host, from its products with the identity's
// columns (times(block) returns the operator times a matrix of columns), a block of them at a time:
// the copy, not the product's work on all cols columns at once (several times rows x cols), bounds
// the memory. width: columns per block; 0 takes as many as 2^22 entries hold (32 MB of doubles).
template <class T, class Space, class Times>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> dense_by_columns(index rows, index cols,
                                                                  const ::h2expr::context_ptr<Space>& ctx, Times&& times,
                                                                  index width = 0) {
  using dense = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  require(rows >= 0 && cols >= 0 && (rows == 0 || cols <= (index(1) << 28) / rows),
          "to_dense of a " + std::to_string(rows) + " x " + std::to_string(cols) + " operator: too large for a dense copy");
  if (width <= 0) width = std::max<index>(64, (index(1) << 22) / std::max<index>(rows, 1));
  dense out(rows, cols);
  for (index j = 0; j < cols; j += width) {
    const index w = std::min(width, cols - j);
    dense unit = dense::Zero(cols, w);
    unit.middleRows(j, w).setIdentity();
    out.middleCols(j, w) = to_dense(times(matrix<T, Space>(unit, ctx)));
  }
  return out;
}

}  // namespace detail

}  // namespace h2expr
