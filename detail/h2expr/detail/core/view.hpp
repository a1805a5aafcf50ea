#pragma once
// view / const_view: non-owning column-major blocks (data, rows, cols, ld) in a space's memory.
// What samplers receive, what sub-blocks of a matrix are, and what to_dense() accepts.
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/index.hpp>

#include <cstdint>
#include <string>

namespace h2expr {

namespace detail {
inline void check_block(index rows, index cols, index i, index j, index r, index c) {
  require<dimension_mismatch>(i >= 0 && j >= 0 && r >= 0 && c >= 0 && i + r <= rows && j + c <= cols,
                              "block (" + std::to_string(i) + ", " + std::to_string(j) + ") of size " +
                                  std::to_string(r) + " x " + std::to_string(c) + " is outside a " +
                                  std::to_string(rows) + " x " + std::to_string(cols) + " matrix");
}
}  // namespace detail

template <class T, class Space = host>
class view {
 public:
  using value_type = T;
  using space = Space;
  view() = default;
  view(T* data, index rows, index cols, index ld, ::h2expr::context<Space>* ctx)
      : data_(data), rows_(rows), cols_(cols), ld_(ld), ctx_(ctx) {
    detail::require(rows >= 0 && cols >= 0 && ld >= (rows > 0 ? rows : 0), "view with a negative size or ld < rows");
  }
  T* data() const { return data_; }
  index rows() const { return rows_; }
  index cols() const { return cols_; }
  index ld() const { return ld_; }
  ::h2expr::context<Space>* context() const { return ctx_; }
  // Rows i..i+r, columns j..j+c.
  view block(index i, index j, index r, index c) const {
    detail::check_block(rows_, cols_, i, j, r, c);
    return view(data_ + i + j * ld_, r, c, r ? ld_ : 0, ctx_);
  }
  view columns(index j, index c) const { return block(0, j, rows_, c); }

 private:
  T* data_ = nullptr;
  index rows_ = 0, cols_ = 0, ld_ = 0;
  ::h2expr::context<Space>* ctx_ = nullptr;
};

template <class T, class Space = host>
class const_view {
 public:
  using value_type = T;
  using space = Space;
  const_view() = default;
  const_view(const T* data, index rows, index cols, index ld, ::h2expr::context<Space>* ctx)
      : data_(data), rows_(rows), cols_(cols), ld_(ld), ctx_(ctx) {
    detail::require(rows >= 0 && cols >= 0 && ld >= (rows > 0 ? rows : 0), "view with a negative size or ld < rows");
  }
  const_view(const view<T, Space>& v)  // NOLINT: a view is usable wherever a const_view is
      : data_(v.data()), rows_(v.rows()), cols_(v.cols()), ld_(v.ld()), ctx_(v.context()) {}
  const T* data() const { return data_; }
  index rows() const { return rows_; }
  index cols() const { return cols_; }
  index ld() const { return ld_; }
  ::h2expr::context<Space>* context() const { return ctx_; }
  const_view block(index i, index j, index r, index c) const {
    detail::check_block(rows_, cols_, i, j, r, c);
    return const_view(data_ + i + j * ld_, r, c, r ? ld_ : 0, ctx_);
  }
  const_view columns(index j, index c) const { return block(0, j, rows_, c); }

 private:
  const T* data_ = nullptr;
  index rows_ = 0, cols_ = 0, ld_ = 0;
  ::h2expr::context<Space>* ctx_ = nullptr;
};

}  // namespace h2expr
