#pragma once
// Lazy expressions over operators: H2 matrices, sparse matrices, samplers, dense matrices, diagonal
// matrices (identity, diagonal) and Cholesky solves, combined with +, -, unary -, scalar *, / and
// operator * (composition), transpose() and solve(cholesky(S)), nested freely. Nothing is computed when an expression is written: an
// expression times a block of vectors evaluates it (one pass, temporaries planned once), and
// hara(expr, tol) samples it (expressions/evaluate.hpp).
//
//   auto Q = hx::hara(A + 2.0 * hx::transpose(A) - A * A, 1e-6);
//   auto S = hx::hara(A22 - A21 * hx::solve(hx::cholesky(A11)) * A12, 1e-4, {.structure = s});
//
// As in Eigen, a node refers to the operands it was given as lvalues (they must outlive it) and holds
// the temporaries it was given (sub-expressions, a factor) by value.
#include <h2expr/detail/operands/diagonal_matrix.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/h2/h2_matrix.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/randomized/sampler.hpp>

#include <boost/hana/all_of.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/equal.hpp>
#include <boost/hana/front.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <concepts>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace h2expr {

template <class T, class Space>
class sparse_matrix;
template <class T, class Space>
class sparse_cholesky;

namespace detail {

// Operators the expression layer applies directly.
template <class X>
struct is_leaf : std::false_type {};
template <class T, class Space>
struct is_leaf<h2_matrix<T, Space>> : std::true_type {};
template <class T, class Space>
struct is_leaf<sparse_matrix<T, Space>> : std::true_type {};
template <class T, class Space>
struct is_leaf<sampler<T, Space>> : std::true_type {};
template <class T, class Space>
struct is_leaf<matrix<T, Space>> : std::true_type {};
template <class T, class Space>
struct is_leaf<diagonal_matrix<T, Space>> : std::true_type {};

// The base of every node type.
struct expression_node {};

}  // namespace detail

// A user's own operator type joins expressions (and hara) without any change to h2expr when it offers
// what the evaluator asks of every operand:
//
//   struct my_operator : h2expr::operand_base {  // the base: see operand_base
//     using value_type = double;          // float or double
//     using space = h2expr::host;         // or h2expr::cuda
//     h2expr::index rows() const;
//     h2expr::index cols() const;
//     h2expr::context_ptr<space> context_ptr() const;   // the context its products run on
//     // out = alpha op(M) in + beta out; beta == 0 writes out without reading it (it may hold
//     // anything, NaN included); on the CUDA space, on the stream of context_ptr(), which must be
//     // the context of every operand of the expression
//     void apply(h2expr::op t, double alpha, h2expr::const_view<double, space> in, double beta,
//                h2expr::view<double, space> out) const;
//     bool symmetric() const;                            // optional: hara then samples half
//     const h2expr::structure<double>& structure() const;  // optional: hara's default target
//   };
//
// Expressions keep an lvalue operand by reference and a temporary one by value, as any operand.
//
// operand_base: an empty base that puts h2expr among the type's associated namespaces, so that
// 2 * m, m + m, -m, m * m and transpose(m) find h2expr's operators by argument-dependent lookup for a
// type declared outside namespace h2expr (without it, only the forms with an h2expr operand do, such
// as A + m or m * X, unless the operators are named: h2expr::transpose(m), using namespace h2expr).
struct operand_base {};

template <class X>
concept operand = requires(const X& x, op t, typename X::value_type a,
                           const_view<typename X::value_type, typename X::space> in,
                           view<typename X::value_type, typename X::space> out) {
  requires std::is_same_v<typename X::value_type, float> || std::is_same_v<typename X::value_type, double>;
  requires is_space_v<typename X::space>;
  { x.rows() } -> std::convertible_to<index>;
  { x.cols() } -> std::convertible_to<index>;
  { x.context_ptr() } -> std::convertible_to<context_ptr<typename X::space>>;
  x.apply(t, a, in, a, out);
};

namespace detail {

template <operand X>
struct is_leaf<X> : std::true_type {};

template <class X>
inline constexpr bool is_dense_v = false;
template <class T, class Space>
inline constexpr bool is_dense_v<matrix<T, Space>> = true;

}  // namespace detail

// Anything an expression can be built from (and hara() can sample).
template <class X>
concept expression = detail::is_leaf<std::remove_cvref_t<X>>::value ||
                     std::is_base_of_v<detail::expression_node, std::remove_cvref_t<X>>;

namespace detail {

// How a node keeps an operand: a reference to an lvalue, a copy (moved) of a temporary.
template <class X>
using stored_t = std::conditional_t<std::is_lvalue_reference_v<X>, const std::remove_reference_t<X>&,
                                    std::remove_cvref_t<X>>;

// The leaf types of an expression, as a Hana tuple of types: the compile-time checks fold over it.
template <class X>
constexpr auto leaf_types() {
  using E = std::remove_cvref_t<X>;
  if constexpr (std::is_base_of_v<expression_node, E>) return E::leaf_types();
  else return boost::hana::tuple_t<E>;
}

// Every leaf of both operands has one value type and one space: checked where the user writes the
// expression, with a message that says which.
template <class A, class B>
constexpr void check_pair() {
  namespace hana = boost::hana;
  constexpr auto leaves = hana::concat(leaf_types<A>(), leaf_types<B>());
  using first = typename decltype(+hana::front(leaves))::type;
  constexpr bool same_type = decltype(hana::all_of(leaves, [](auto t) {
    return hana::type_c<typename decltype(t)::type::value_type> == hana::type_c<typename first::value_type>;
  }))::value;
  constexpr bool same_space = decltype(hana::all_of(leaves, [](auto t) {
    return hana::type_c<typename decltype(t)::type::space> == hana::type_c<typename first::space>;
  }))::value;
  static_assert(same_type, "h2expr: the operands of an expression have different value types (float vs double)");
  static_assert(same_space, "h2expr: the operands of an expression live in different spaces (host vs cuda)");
}

template <class X>
std::string shape(const X& x) {
  return std::to_string(x.rows()) + " x " + std::to_string(x.cols());
}

}  // namespace detail

namespace detail {
// What sums and products share: two operands, their value type and space, their leaves.
template <class L, class R>
struct binary_node : expression_node {
  using left_type = std::remove_cvref_t<L>;
  using right_type = std::remove_cvref_t<R>;
  using value_type = typename left_type::value_type;
  using space = typename left_type::space;
  L left;
  R right;
  template <class X, class Y>
  binary_node(X&& l, Y&& r) : left(std::forward<X>(l)), right(std::forward<Y>(r)) {}
  static constexpr auto leaf_types() { return boost::hana::concat(detail::leaf_types<L>(), detail::leaf_types<R>()); }
  auto children() const { return std::tie(left, right); }
};
}  // namespace detail

// left * a + right * b (a, b = 1, -1 for + and -).
template <class L, class R>
struct sum_expr : detail::binary_node<L, R> {
  using value_type = typename detail::binary_node<L, R>::value_type;
  value_type a, b;
  template <class X, class Y>
  sum_expr(X&& l, Y&& r, value_type a_, value_type b_)
      : detail::binary_node<L, R>(std::forward<X>(l), std::forward<Y>(r)), a(a_), b(b_) {}
  index rows() const { return this->left.rows(); }
  index cols() const { return this->left.cols(); }
};

// left * right as one operator (composition).
template <class L, class R>
struct product_expr : detail::binary_node<L, R> {
  template <class X, class Y>
  product_expr(X&& l, Y&& r) : detail::binary_node<L, R>(std::forward<X>(l), std::forward<Y>(r)) {}
  index rows() const { return this->left.rows(); }
  index cols() const { return this->right.cols(); }
};

namespace detail {
// What scalings and transposes share: one operand, its value type and space, its leaves.
template <class E>
struct unary_node : expression_node {
  using inner_type = std::remove_cvref_t<E>;
  using value_type = typename inner_type::value_type;
  using space = typename inner_type::space;
  E inner;
  template <class X>
  explicit unary_node(X&& e) : inner(std::forward<X>(e)) {}
  static constexpr auto leaf_types() { return detail::leaf_types<E>(); }
  auto children() const { return std::tie(inner); }
};
}  // namespace detail

// s * inner.
template <class E>
struct scaled_expr : detail::unary_node<E> {
  using value_type = typename detail::unary_node<E>::value_type;
  value_type s;
  template <class X>
  scaled_expr(X&& e, value_type s_) : detail::unary_node<E>(std::forward<X>(e)), s(s_) {}
  index rows() const { return this->inner.rows(); }
  index cols() const { return this->inner.cols(); }
};

// inner^T: evaluated by applying inner transposed (sums and products transpose term by term).
template <class E>
struct transpose_expr : detail::unary_node<E> {
  template <class X>
  explicit transpose_expr(X&& e) : detail::unary_node<E>(std::forward<X>(e)) {}
  index rows() const { return this->inner.cols(); }
  index cols() const { return this->inner.rows(); }
};

// S^{-1} through a Cholesky factor of S (copies of a factor share it).
template <class T, class Space>
struct solve_expr : detail::expression_node {
  using value_type = T;
  using space = Space;
  sparse_cholesky<T, Space> factor;
  explicit solve_expr(sparse_cholesky<T, Space> f) : factor(std::move(f)) {}
  index rows() const { return factor.rows(); }
  index cols() const { return factor.rows(); }
  static constexpr auto leaf_types() { return boost::hana::tuple_t<sparse_cholesky<T, Space>>; }
};

namespace detail {
template <class L, class R>
auto make_sum(L&& l, R&& r, double b, const char* what) {
  check_pair<L, R>();
  require<dimension_mismatch>(l.rows() == r.rows() && l.cols() == r.cols(),
                              std::string(what) + ": " + shape(l) + " and " + shape(r));
  using T = typename std::remove_cvref_t<L>::value_type;
  return sum_expr<stored_t<L>, stored_t<R>>(std::forward<L>(l), std::forward<R>(r), T(1), T(b));
}
}  // namespace detail

template <expression L, expression R>
auto operator+(L&& l, R&& r) {
  return detail::make_sum(std::forward<L>(l), std::forward<R>(r), 1, "sum");
}
template <expression L, expression R>
auto operator-(L&& l, R&& r) {
  return detail::make_sum(std::forward<L>(l), std::forward<R>(r), -1, "difference");
}

template <expression E>
auto operator-(E&& e) {
  using T = typename std::remove_cvref_t<E>::value_type;
  return scaled_expr<detail::stored_t<E>>(std::forward<E>(e), T(-1));
}

template <class S, expression E>
  requires std::is_arithmetic_v<S>
auto operator*(S s, E&& e) {
  using T = typename std::remove_cvref_t<E>::value_type;
  return scaled_expr<detail::stored_t<E>>(std::forward<E>(e), T(s));
}
template <expression E, class S>
  requires std::is_arithmetic_v<S>
auto operator*(E&& e, S s) {
  using T = typename std::remove_cvref_t<E>::value_type;
  return scaled_expr<detail::stored_t<E>>(std::forward<E>(e), T(s));
}
template <expression E, class S>
  requires std::is_arithmetic_v<S>
auto operator/(E&& e, S s) {
  using T = typename std::remove_cvref_t<E>::value_type;
  return scaled_expr<detail::stored_t<E>>(std::forward<E>(e), T(1) / T(s));
}

// Composition. (An expression times a dense block of vectors is evaluated instead: see
// evaluate.hpp.)
template <expression L, expression R>
  requires(!detail::is_dense_v<std::remove_cvref_t<R>>)
auto operator*(L&& l, R&& r) {
  detail::check_pair<L, R>();
  detail::require<dimension_mismatch>(l.cols() == r.rows(), "product: " + detail::shape(l) + " times " + detail::shape(r));
  return product_expr<detail::stored_t<L>, detail::stored_t<R>>(std::forward<L>(l), std::forward<R>(r));
}

template <expression E>
auto transpose(E&& e) {
  return transpose_expr<detail::stored_t<E>>(std::forward<E>(e));
}

// solve(cholesky(S)): the inverse of S applied through its factor, as an operator.
template <class T, class Space>
solve_expr<T, Space> solve(sparse_cholesky<T, Space> factor) {
  return solve_expr<T, Space>(std::move(factor));
}

}  // namespace h2expr
