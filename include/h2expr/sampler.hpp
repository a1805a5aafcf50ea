#pragma once
// sampler<T, Space>: an operator known only through its products with blocks of vectors, the input
// hara() rebuilds as an H2 matrix. A user lambda `f(const_view in, view out)` writes out = M in;
// one function is taken as a symmetric operator, two (f, f_transpose) as a general one. H2 matrices
// and their products convert to samplers too (samplers/), keeping their structure as a hint.
//
//   hx::sampler<double> S(n, [&](hx::const_view<double> in, hx::view<double> out) { /* out = M in */ });
//   hx::matrix<double> Y = S * X;
#include <h2expr/context.hpp>
#include <h2expr/error.hpp>
#include <h2expr/matrix.hpp>
#include <h2expr/structure.hpp>
#include <h2expr/view.hpp>

#include <functional>
#include <string>
#include <utility>

namespace h2expr {

template <class T, class Space = host>
class sampler {
 public:
  using value_type = T;
  using space = Space;
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

  // out = M in, out = M^T in (sizes checked).
  void apply(const_view<T, Space> in, view<T, Space> out) const { run(f_, rows_, cols_, in, out, "M"); }
  void apply_transpose(const_view<T, Space> in, view<T, Space> out) const { run(ft_, cols_, rows_, in, out, "M^T"); }

  // The transposed operator, as a sampler.
  sampler transposed() const {
    sampler t(*this);
    std::swap(t.rows_, t.cols_);
    std::swap(t.f_, t.ft_);
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

  ::h2expr::context_ptr<Space> ctx_;
  index rows_ = 0, cols_ = 0;
  function f_, ft_;
  bool symmetric_ = false;
  ::h2expr::structure<T> structure_;
};

}  // namespace h2expr
