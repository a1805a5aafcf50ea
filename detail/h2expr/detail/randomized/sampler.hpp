#pragma once
// sampler<T, Space>: an operator known only through its products with blocks of vectors, the input
// hara() rebuilds as an H2 matrix. A user lambda `f(const_view in, view out)` writes out = M in;
// one function is taken as a symmetric operator, two (f, f_transpose) as a general one. H2 matrices
// and their products convert to samplers too (samplers/), keeping their structure as a hint. A
// sampler may carry an exact diagonal part d (with_diagonal): M = f + diag(d), of which hara() samples
// f alone and puts diag(d) into the new matrix's dense diagonal leaves. A sampler made from an
// expression whose H2 operands share a tree also carries f in that tree's padded order
// (with_tree_products), which hara() calls when it builds on the same tree: no reordering per block.
//
//   hx::sampler<double> S(n, [&](hx::const_view<double> in, hx::view<double> out) { /* out = M in */ });
//   hx::matrix<double> Y = S * X;
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/structure/structure.hpp>
#include <h2expr/detail/core/view.hpp>
#include <h2expr/detail/h2/h2_data.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace h2expr {

template <class T, class Space = host>
class sampler : public detail::values_in_space<T, Space> {
 public:
  using function = std::function<void(const_view<T, Space> in, view<T, Space> out)>;

  // A symmetric n x n operator: f serves M and M^T.
  sampler(index n, function f, ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : sampler(n, n, f, f, std::move(ctx)) {
    symmetric_ = true;
  }
  // A general rows x cols operator: f gives M X, f_transpose gives M^T X.
  sampler(index rows, index cols, function f, function f_transpose,
          ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : ctx_(std::move(ctx)), rows_(rows), cols_(cols), f_(std::move(f)), ft_(std::move(f_transpose)) {
    detail::require(rows >= 0 && cols >= 0, "sampler: negative size " + std::to_string(rows) + " x " + std::to_string(cols));
    detail::require(bool(f_) && bool(ft_), "sampler: empty function");
    detail::require(ctx_ != nullptr, "sampler: no context");
  }

  index rows() const { return rows_; }
  index cols() const { return cols_; }
  bool symmetric() const { return symmetric_; }
  // The structure hara() uses when the options name none; empty for a bare lambda.
  const ::h2expr::structure<T>& structure() const { return structure_; }
  sampler& with_structure(::h2expr::structure<T> s) {
    structure_ = std::move(s);
    return *this;
  }
  const ::h2expr::context_ptr<Space>& context_ptr() const { return ctx_; }

  // The operator declared symmetric, as the caller knows it to be where the expression layer cannot
  // see it (X (3 I - A X (3 I - A X)) for symmetric A and X; it recognises sums of symmetric terms and
  // palindromic products only): M^T products become M's, and hara() samples M alone, half the columns.
  sampler& assume_symmetric() {
    detail::require<dimension_mismatch>(rows_ == cols_, "sampler: a " + std::to_string(rows_) + " x " +
                                                            std::to_string(cols_) + " operator is not symmetric");
    symmetric_ = true, ft_ = f_, tree_ft_ = tree_f_;
    return *this;
  }

  // M becomes f + diag(d), for an n x 1 column d with finite entries (M square): an exact diagonal part
  // that hara() does not sample. It replaces any diagonal part given before.
  sampler& with_diagonal(matrix<T, Space> d) {
    detail::require<dimension_mismatch>(rows_ == cols_ && d.rows() == rows_ && d.cols() == 1,
                                        "sampler: the diagonal part of a " + std::to_string(rows_) + " x " +
                                            std::to_string(cols_) + " operator is " + std::to_string(d.rows()) +
                                            " x " + std::to_string(d.cols()));
    detail::require<non_finite_value>(d.rows() == 0 || detail::all_finite(d.context(), d.data(), std::size_t(d.rows())),
                                      "sampler: the diagonal part has entries that are not finite");
    diagonal_ = std::make_shared<const matrix<T, Space>>(std::move(d));
    return *this;
  }
  // The exact diagonal part d (n entries in the space), or null.
  const matrix<T, Space>* diagonal() const { return diagonal_.get(); }

  // f and f_transpose again, on blocks in the padded tree order o (np rows, zero padding rows in and
  // out; see padded_order): M - diag(d) as apply_off_diagonal, without reordering.
  sampler& with_tree_products(detail::padded_order<Space> o, function f, function f_transpose) {
    detail::require(!o.user() && o.n == rows_ && rows_ == cols_ && bool(f) && bool(f_transpose),
                    "sampler: tree-order products need a square operator, the tree and both functions");
    tree_ = o, tree_f_ = std::move(f), tree_ft_ = std::move(f_transpose);
    return *this;
  }
  // The padded order tree_apply works in (user() when there is none).
  const detail::padded_order<Space>& tree_order() const { return tree_; }
  // out = (M - diag(d)) in, or its transpose, on blocks in tree_order().
  void tree_apply(detail::op t, const_view<T, Space> in, view<T, Space> out) const {
    detail::require(!tree_.user(), "sampler: no tree-order products");
    run(t == detail::op::none ? tree_f_ : tree_ft_, tree_.np, tree_.np, in, out,
        t == detail::op::none ? "M (tree order)" : "M^T (tree order)");
  }

  // out = M in, out = M^T in (sizes checked).
  void apply(const_view<T, Space> in, view<T, Space> out) const {
    run(f_, rows_, cols_, in, out, "M");
    add_diagonal(in, out);
  }
  void apply_transpose(const_view<T, Space> in, view<T, Space> out) const {
    run(ft_, cols_, rows_, in, out, "M^T");
    add_diagonal(in, out);
  }
  // out = (M - diag(d)) in and its transpose: the part hara() samples.
  void apply_off_diagonal(const_view<T, Space> in, view<T, Space> out) const { run(f_, rows_, cols_, in, out, "M"); }
  void apply_transpose_off_diagonal(const_view<T, Space> in, view<T, Space> out) const {
    run(ft_, cols_, rows_, in, out, "M^T");
  }

  // The transposed operator, as a sampler.
  sampler transposed() const {
    sampler t(*this);
    std::swap(t.rows_, t.cols_);
    std::swap(t.f_, t.ft_);
    std::swap(t.tree_f_, t.tree_ft_);
    return t;
  }

 private:
  void run(const function& f, index out_rows, index in_rows, const_view<T, Space> in, view<T, Space> out,
           const char* what) const {
    detail::require<dimension_mismatch>(in.rows() == in_rows && out.rows() == out_rows && in.cols() == out.cols(),
                                        std::string("sampler: ") + what + " is " + std::to_string(out_rows) + " x " +
                                            std::to_string(in_rows) + ", the vectors " + std::to_string(in.rows()) +
                                            " x " + std::to_string(in.cols()) + " -> " + std::to_string(out.rows()) +
                                            " x " + std::to_string(out.cols()));
    if (in.cols() > 0) f(in, out);
  }

  void add_diagonal(const_view<T, Space> in, view<T, Space> out) const {
    if (diagonal_ && in.cols() > 0)
      detail::axpby_2d(*ctx_, std::size_t(rows_), std::size_t(in.cols()), T(1), in.data(), std::size_t(in.ld()), T(1),
                       out.data(), std::size_t(out.ld()), diagonal_->data());
  }

  ::h2expr::context_ptr<Space> ctx_;
  index rows_ = 0, cols_ = 0;
  function f_, ft_;
  detail::padded_order<Space> tree_;  // tree_f_, tree_ft_: f and ft in that order, if any
  function tree_f_, tree_ft_;
  std::shared_ptr<const matrix<T, Space>> diagonal_;  // shared by copies
  bool symmetric_ = false;
  ::h2expr::structure<T> structure_;
};

}  // namespace h2expr
