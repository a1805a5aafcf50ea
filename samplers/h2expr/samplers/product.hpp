#pragma once
// H2 matrices, their transposes and samplers as operands of hara(), and the product of two operands
// (A * B samples through two multi-vector products: B X, then A (B X); its transpose B^T (A^T X)).
// An operand made from an H2 matrix refers to it (as Eigen's expressions do): the matrix must
// outlive the sampler, e.g. `hara(A * A, tol)` in one statement.
#include <h2expr/h2_matrix.hpp>
#include <h2expr/sampler.hpp>

#include <string>
#include <type_traits>

namespace h2expr {

namespace detail {

template <class X>
struct operand_traits : std::false_type {};
template <class T, class Space>
struct operand_traits<h2_matrix<T, Space>> : std::true_type {
  using scalar = T;
  using space = Space;
};
template <class T, class Space>
struct operand_traits<transposed<h2_matrix<T, Space>>> : operand_traits<h2_matrix<T, Space>> {};
template <class T, class Space>
struct operand_traits<sampler<T, Space>> : std::true_type {
  using scalar = T;
  using space = Space;
};

}  // namespace detail

// An operator hara() can sample: an H2 matrix, its transpose, or a sampler.
template <class X>
concept operand = detail::operand_traits<std::remove_cvref_t<X>>::value;

template <class T, class Space>
sampler<T, Space> as_sampler(const sampler<T, Space>& s) {
  return s;
}

template <class T, class Space>
sampler<T, Space> as_sampler(const h2_matrix<T, Space>& A) {
  const h2_matrix<T, Space>* a = &A;
  auto product = [a](detail::op trans) {
    return [a, trans](const_view<T, Space> in, view<T, Space> out) { detail::hgemv(a->data(), trans, in, out); };
  };
  if (A.symmetric()) {
    sampler<T, Space> s(A.rows(), product(detail::op::none), A.data().ctx);
    return s.with_structure(A.structure());
  }
  sampler<T, Space> s(A.rows(), A.cols(), product(detail::op::none), product(detail::op::transpose), A.data().ctx);
  return s.with_structure(A.structure());
}

template <class T, class Space>
sampler<T, Space> as_sampler(const transposed<h2_matrix<T, Space>>& At) {
  return as_sampler(At.matrix).transposed();
}

// L * R as one operator: R's product first, then L's, with a temporary of the inner size.
template <class L, class R>
  requires operand<L> && operand<R>
auto operator*(const L& left, const R& right) {
  using T = typename detail::operand_traits<L>::scalar;
  using Space = typename detail::operand_traits<L>::space;
  static_assert(std::is_same_v<T, typename detail::operand_traits<R>::scalar>,
                "h2expr: the operands of a product have different value types");
  static_assert(std::is_same_v<Space, typename detail::operand_traits<R>::space>,
                "h2expr: the operands of a product live in different spaces");
  auto a = as_sampler(left), b = as_sampler(right);
  detail::require<dimension_mismatch>(a.cols() == b.rows(), "product: " + std::to_string(a.rows()) + " x " +
                                                                  std::to_string(a.cols()) + " times " +
                                                                  std::to_string(b.rows()) + " x " +
                                                                  std::to_string(b.cols()));
  auto chain = [](const sampler<T, Space>& first, const sampler<T, Space>& second, bool transpose) {
    return [first, second, transpose](const_view<T, Space> in, view<T, Space> out) {
      auto tmp = matrix<T, Space>::uninitialized(transpose ? first.cols() : first.rows(), in.cols(),
                                                 first.context_ptr());
      if (transpose) first.apply_transpose(in, tmp.view()), second.apply_transpose(tmp.view(), out);
      else first.apply(in, tmp.view()), second.apply(tmp.view(), out);
    };
  };
  // (A B)^T = B^T A^T; A A with a symmetric A is symmetric.
  const bool same = static_cast<const void*>(&left) == static_cast<const void*>(&right);
  sampler<T, Space> s = same && a.symmetric()
                            ? sampler<T, Space>(a.rows(), chain(b, a, false), a.context_ptr())
                            : sampler<T, Space>(a.rows(), b.cols(), chain(b, a, false), chain(a, b, true),
                                                a.context_ptr());
  if (!a.structure().empty() && a.rows() == b.cols()) s.with_structure(a.structure());
  else if (!b.structure().empty() && a.rows() == b.cols()) s.with_structure(b.structure());
  return s;
}

}  // namespace h2expr
