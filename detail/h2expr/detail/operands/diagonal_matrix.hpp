#pragma once
// diagonal_matrix<T, Space>: a diagonal operator for expressions, the identity (hx::identity<T,
// Space>(n)) or diag(d) of a column d (hx::diagonal(d)). Applying it costs one pass over the vectors.
// Where a sum that hara() samples holds diagonal terms, they are not sampled: they go into the new
// matrix's dense diagonal leaves exactly (expressions/evaluate.hpp).
//
//   auto A = hx::hara(K + 1e-2 * hx::identity<double>(n), 1e-8);   // K + sigma^2 I
//   auto B = hx::hara(K + hx::diagonal(d), 1e-6);                    // d: an n x 1 matrix
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/core/view.hpp>

#include <memory>
#include <string>
#include <utility>

namespace h2expr {

template <class T, class Space = host>
class diagonal_matrix : public detail::values_in_space<T, Space> {
 public:
  // The n x n identity.
  explicit diagonal_matrix(index n, ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : n_(n), ctx_(std::move(ctx)) {
    detail::require(n >= 0, "identity: negative size " + std::to_string(n));
    detail::require(ctx_ != nullptr, "identity: no context");
  }
  // diag(d) of an n x 1 column with finite entries.
  explicit diagonal_matrix(matrix<T, Space> d) : n_(d.rows()), ctx_(d.context_ptr()) {
    detail::require<dimension_mismatch>(d.cols() == 1, "diagonal: d must be one column, got " +
                                                           std::to_string(d.rows()) + " x " + std::to_string(d.cols()));
    detail::require<non_finite_value>(d.rows() == 0 || detail::all_finite(d.context(), d.data(), std::size_t(d.rows())),
                                      "diagonal: d has entries that are not finite");
    d_ = std::make_shared<const matrix<T, Space>>(std::move(d));
  }

  index rows() const { return n_; }
  index cols() const { return n_; }
  bool symmetric() const { return true; }
  bool is_identity() const { return d_ == nullptr; }
  // The diagonal's entries in the space (n of them), or null for the identity.
  const T* entries() const { return d_ ? d_->data() : nullptr; }
  const ::h2expr::context_ptr<Space>& context_ptr() const { return ctx_; }

  // out = alpha D in + beta out (beta == 0 does not read out).
  void apply(T alpha, const_view<T, Space> in, T beta, view<T, Space> out) const {
    detail::require<dimension_mismatch>(in.rows() == n_ && out.rows() == n_ && in.cols() == out.cols(),
                                        "diagonal: " + std::to_string(n_) + " x " + std::to_string(n_) + ", the vectors " +
                                            std::to_string(in.rows()) + " x " + std::to_string(in.cols()) + " -> " +
                                            std::to_string(out.rows()) + " x " + std::to_string(out.cols()));
    detail::axpby_2d(*ctx_, std::size_t(n_), std::size_t(in.cols()), alpha, in.data(), std::size_t(in.ld()), beta,
                     out.data(), std::size_t(out.ld()), entries());
  }

 private:
  index n_ = 0;
  std::shared_ptr<const matrix<T, Space>> d_;  // shared by copies (expressions copy temporaries)
  ::h2expr::context_ptr<Space> ctx_;
};

// The n x n identity, as an expression operand: hx::identity<double>(n), hx::identity<float, hx::cuda>(n, ctx).
template <class T, class Space = host>
diagonal_matrix<T, Space> identity(index n, ::h2expr::context_ptr<Space> ctx = default_context<Space>()) {
  return diagonal_matrix<T, Space>(n, std::move(ctx));
}

// diag(d) of an n x 1 matrix, as an expression operand.
template <class T, class Space>
diagonal_matrix<T, Space> diagonal(matrix<T, Space> d) {
  return diagonal_matrix<T, Space>(std::move(d));
}

}  // namespace h2expr
