#pragma once
// Evaluation of an expression times a block of vectors, and the expression as a sampler for hara().
//
// An evaluator mirrors the expression tree once; every node computes out = alpha op(node) in + beta out
// (op: the node or its transpose, so an expression's transpose is derived term by term: (L R)^T =
// R^T L^T, (L + R)^T = L^T + R^T, S^{-1} is symmetric). Sums are fused into the output: the second
// term accumulates with beta = 1 into the first's result (H2, sparse and dense products accumulate
// natively). The temporaries (a product's inner block, a sampler's or a solve's result when it must be
// scaled or added) belong to their node and grow to the widest block seen, so sampling a block of
// vectors allocates nothing once the first block has passed.
//
// Diagonal terms of the top-level sum (identities, diagonals, scaled, in any order: K + 1e-2 I) are not
// evaluated by the sampler's function: their sum d is the sampler's exact diagonal part (with_diagonal),
// so hara() samples the rest and adds diag(d) to the new matrix's dense leaves exactly.
//
// Blocks of vectors come in the user's row order, or in the padded tree order of one cluster tree
// (padded_order): there H2 operands on that tree multiply with no reordering (hara(A * A) samples and
// the inner block stay in tree order), and any other leaf reorders its block in and out.
//
// The sampler also carries what hara() deduces from the expression: its structure (an operand's with
// the expression's shape) and whether it is symmetric (A * A of a symmetric A, A + A^T, X^T M X with a
// symmetric M, e.g. A22 - A21 solve(cholesky(A11)) A12 when A21 = A12^T), so that hara samples half.
#include <h2expr/detail/operands/sparse_cholesky.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/h2/hgemv.hpp>
#include <h2expr/detail/operands/diagonal_matrix.hpp>
#include <h2expr/detail/expressions/expression.hpp>
#include <h2expr/detail/randomized/sampler.hpp>
#include <h2expr/detail/operands/sparse_matrix.hpp>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {

namespace detail {

// A node's temporary: one block, grown to the widest request, reused by every later one.
template <class T, class Space>
class scratch {
 public:
  view<T, Space> get(index rows, index cols, const ::h2expr::context_ptr<Space>& ctx) {
    if (block_.rows() != rows || block_.cols() < cols)
      block_ = matrix<T, Space>::uninitialized(rows, std::max(cols, block_.cols()), ctx);
    return block_.view().columns(0, cols);
  }

 private:
  matrix<T, Space> block_;
};

inline op flip(op t) { return t == op::none ? op::transpose : op::none; }

// f(leaf) for every leaf of an expression, left to right: an operand, or a node without children()
// (a solve: its factor is what it runs on).
template <class X, class F>
void for_each_leaf(const X& x, F&& f) {
  if constexpr (!is_leaf<X>::value && requires { x.children(); })
    std::apply([&](const auto&... child) { (for_each_leaf(child, f), ...); }, x.children());
  else f(x);
}

template <class T, class Space>
const ::h2expr::context_ptr<Space>& context_of_leaf(const h2_matrix<T, Space>& A) {
  return A.data().ctx;
}
template <class T, class Space>
const ::h2expr::context_ptr<Space>& context_of_leaf(const solve_expr<T, Space>& e) {
  return e.factor.context_ptr();
}
template <class X>
auto context_of_leaf(const X& x) -> decltype(x.context_ptr()) {
  return x.context_ptr();
}

// The context an expression runs on: its leftmost leaf's. On the CUDA space every leaf must share it
// (one stream orders the products and their temporaries).
template <class X>
::h2expr::context_ptr<typename X::space> context_of(const X& x) {
  ::h2expr::context_ptr<typename X::space> ctx;
  for_each_leaf(x, [&](const auto& leaf) {
    const auto& c = context_of_leaf(leaf);
    if (!ctx) ctx = c;
    else if constexpr (!std::is_same_v<typename X::space, host>)
      require(c == ctx, "expression: its operands live on different CUDA contexts (streams); create them with one");
  });
  return ctx;
}

template <class X>
class evaluator;

// out = alpha M in + beta out for an operator that can only write its result, write(in, dst): into
// out itself when alpha = 1 and beta = 0, else into the node's temporary, then added by one axpby.
template <class T, class Space, class Write>
void write_or_accumulate(T alpha, const_view<T, Space> in, T beta, view<T, Space> out, scratch<T, Space>& tmp,
                         const ::h2expr::context_ptr<Space>& ctx, Write&& write) {
  if (alpha == T(1) && beta == T(0)) return write(in, out);
  auto t = tmp.get(out.rows(), out.cols(), ctx);
  write(in, t);
  axpby_2d(*ctx, std::size_t(out.rows()), std::size_t(out.cols()), alpha, t.data(), std::size_t(t.ld()), beta,
           out.data(), std::size_t(out.ld()));
}

// A leaf's product in either order: in the user's, its own apply_user; in a padded order, the block is
// put in the user's order, multiplied, and put back (its temporaries kept for the next block).
template <class Derived, class T, class Space>
class leaf_evaluator {
 public:
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    auto& self = static_cast<Derived&>(*this);
    if (o.user()) return self.apply_user(t, alpha, in, beta, out);
    const auto& ctx = context_of_leaf(self.leaf());
    auto& c = *ctx;
    const int nv = int(in.cols());
    auto X = x_.get(o.n, nv, ctx), Y = y_.get(o.n, nv, ctx);
    scatter_rows(c, o.map, o.np, in.data(), in.ld(), X.data(), X.ld(), nv);
    self.apply_user(t, T(1), X, T(0), Y);
    if (alpha == T(1) && beta == T(0)) return gather_rows(c, o.map, o.np, Y.data(), Y.ld(), out.data(), out.ld(), nv);
    auto P = p_.get(o.np, nv, ctx);
    gather_rows(c, o.map, o.np, Y.data(), Y.ld(), P.data(), P.ld(), nv);
    axpby_2d(c, std::size_t(o.np), std::size_t(nv), alpha, P.data(), std::size_t(P.ld()), beta, out.data(),
             std::size_t(out.ld()));
  }

 private:
  scratch<T, Space> x_, y_, p_;
};

template <class T, class Space>
class evaluator<h2_matrix<T, Space>> : public leaf_evaluator<evaluator<h2_matrix<T, Space>>, T, Space> {
 public:
  explicit evaluator(const h2_matrix<T, Space>& A) : A_(A) {}
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    if (A_.data().works_in(o)) return hgemv_padded(A_.data(), t, alpha, in, beta, out);
    leaf_evaluator<evaluator, T, Space>::apply(t, alpha, in, beta, out, o);
  }
  void apply_user(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) {
    hgemv(A_.data(), t, alpha, in, beta, out);
  }
  const h2_matrix<T, Space>& leaf() const { return A_; }

 private:
  const h2_matrix<T, Space>& A_;
};

template <class T, class Space>
class evaluator<sparse_matrix<T, Space>> : public leaf_evaluator<evaluator<sparse_matrix<T, Space>>, T, Space> {
 public:
  explicit evaluator(const sparse_matrix<T, Space>& S) : S_(S) {}
  void apply_user(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) {
    S_.multiply(t, alpha, in, beta, out);
  }
  const sparse_matrix<T, Space>& leaf() const { return S_; }

 private:
  const sparse_matrix<T, Space>& S_;
};

template <class T, class Space>
class evaluator<matrix<T, Space>> : public leaf_evaluator<evaluator<matrix<T, Space>>, T, Space> {
 public:
  explicit evaluator(const matrix<T, Space>& D) : D_(D) {}
  const matrix<T, Space>& leaf() const { return D_; }
  void apply_user(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) {
    require(D_.rows() <= INT_MAX && D_.cols() <= INT_MAX && in.cols() <= INT_MAX && in.ld() <= INT_MAX &&
                out.ld() <= INT_MAX,
            "dense operand: sizes past the 32-bit integers of BLAS");
    gemm_strided_batched(D_.context(), t, op::none, int(out.rows()), int(in.cols()), int(in.rows()), alpha, D_.data(),
                         int(std::max<index>(D_.rows(), 1)), 0, in.data(), int(std::max<index>(in.ld(), 1)), 0, beta,
                         out.data(), int(std::max<index>(out.ld(), 1)), 0, 1);
  }

 private:
  const matrix<T, Space>& D_;
};

template <class T, class Space>
class evaluator<diagonal_matrix<T, Space>> : public leaf_evaluator<evaluator<diagonal_matrix<T, Space>>, T, Space> {
 public:
  explicit evaluator(const diagonal_matrix<T, Space>& D) : D_(D) {}
  // The identity is one in any order (padding rows are zero in and out): no reordering.
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    if (o.user() || !D_.is_identity())
      return leaf_evaluator<evaluator, T, Space>::apply(t, alpha, in, beta, out, o);
    axpby_2d(*D_.context_ptr(), std::size_t(in.rows()), std::size_t(in.cols()), alpha, in.data(), std::size_t(in.ld()), beta,
             out.data(), std::size_t(out.ld()));
  }
  void apply_user(op, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) { D_.apply(alpha, in, beta, out); }
  const diagonal_matrix<T, Space>& leaf() const { return D_; }

 private:
  const diagonal_matrix<T, Space>& D_;
};

// A user's operand (expression.hpp's concept operand): its own apply, in the evaluator's argument order.
template <operand X>
class evaluator<X> : public leaf_evaluator<evaluator<X>, typename X::value_type, typename X::space> {
 public:
  using T = typename X::value_type;
  using Space = typename X::space;
  explicit evaluator(const X& x) : x_(x) {}
  void apply_user(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) {
    x_.apply(t, alpha, in, beta, out);
  }
  const X& leaf() const { return x_; }

 private:
  const X& x_;
};

template <class T, class Space>
class evaluator<sampler<T, Space>> : public leaf_evaluator<evaluator<sampler<T, Space>>, T, Space> {
 public:
  explicit evaluator(const sampler<T, Space>& s) : s_(s) {}
  const sampler<T, Space>& leaf() const { return s_; }
  void apply_user(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) {
    write_or_accumulate(alpha, in, beta, out, tmp_, s_.context_ptr(), [&](const_view<T, Space> x, view<T, Space> y) {
      if (t == op::none) s_.apply(x, y);
      else s_.apply_transpose(x, y);
    });
  }

 private:
  const sampler<T, Space>& s_;
  scratch<T, Space> tmp_;
};

template <class T, class Space>
class evaluator<solve_expr<T, Space>> : public leaf_evaluator<evaluator<solve_expr<T, Space>>, T, Space> {
 public:
  explicit evaluator(const solve_expr<T, Space>& e) : e_(e), factor_(e.factor) {}
  const solve_expr<T, Space>& leaf() const { return e_; }
  // S^{-1} is symmetric: op does not matter.
  void apply_user(op, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) {
    write_or_accumulate(alpha, in, beta, out, tmp_, factor_.context_ptr(),
                        [&](const_view<T, Space> x, view<T, Space> y) { factor_.solve(x, y); });
  }

 private:
  const solve_expr<T, Space>& e_;
  const sparse_cholesky<T, Space>& factor_;
  scratch<T, Space> tmp_;
};

template <class L, class R>
class evaluator<sum_expr<L, R>> {
  using T = typename sum_expr<L, R>::value_type;
  using Space = typename sum_expr<L, R>::space;

 public:
  explicit evaluator(const sum_expr<L, R>& e) : e_(e), left_(e.left), right_(e.right) {}
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    if (skip_left_) return right_.apply(t, alpha * e_.b, in, beta, out, o);
    left_.apply(t, alpha * e_.a, in, beta, out, o);
    if (!skip_right_) right_.apply(t, alpha * e_.b, in, T(1), out, o);
  }
  // Terms left out of apply (diagonal terms the sampler adds exactly; not both).
  void skip(bool left, bool right) { skip_left_ = left, skip_right_ = right; }
  evaluator<std::remove_cvref_t<L>>& left() { return left_; }
  evaluator<std::remove_cvref_t<R>>& right() { return right_; }

 private:
  bool skip_left_ = false, skip_right_ = false;
  const sum_expr<L, R>& e_;
  evaluator<std::remove_cvref_t<L>> left_;
  evaluator<std::remove_cvref_t<R>> right_;
};

template <class L, class R>
class evaluator<product_expr<L, R>> {
  using T = typename product_expr<L, R>::value_type;
  using Space = typename product_expr<L, R>::space;

 public:
  explicit evaluator(const product_expr<L, R>& e) : e_(e), left_(e.left), right_(e.right), ctx_(context_of(e)) {}
  // L R x: the inner block first; (L R)^T x = R^T (L^T x). Both inner blocks are L.cols() rows.
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    auto tmp = tmp_.get(o.rows(e_.left.cols()), in.cols(), ctx_);
    if (t == op::none) {
      right_.apply(t, T(1), in, T(0), tmp, o);
      left_.apply(t, alpha, tmp, beta, out, o);
    } else {
      left_.apply(t, T(1), in, T(0), tmp, o);
      right_.apply(t, alpha, tmp, beta, out, o);
    }
  }

 private:
  const product_expr<L, R>& e_;
  evaluator<std::remove_cvref_t<L>> left_;
  evaluator<std::remove_cvref_t<R>> right_;
  ::h2expr::context_ptr<Space> ctx_;
  scratch<T, Space> tmp_;
};

template <class E>
class evaluator<scaled_expr<E>> {
  using T = typename scaled_expr<E>::value_type;
  using Space = typename scaled_expr<E>::space;

 public:
  explicit evaluator(const scaled_expr<E>& e) : s_(e.s), inner_(e.inner) {}
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    inner_.apply(t, alpha * s_, in, beta, out, o);
  }
  evaluator<std::remove_cvref_t<E>>& inner() { return inner_; }

 private:
  T s_;
  evaluator<std::remove_cvref_t<E>> inner_;
};

template <class E>
class evaluator<transpose_expr<E>> {
  using T = typename transpose_expr<E>::value_type;
  using Space = typename transpose_expr<E>::space;

 public:
  explicit evaluator(const transpose_expr<E>& e) : inner_(e.inner) {}
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out, const padded_order<Space>& o = {}) {
    inner_.apply(flip(t), alpha, in, beta, out, o);
  }
  evaluator<std::remove_cvref_t<E>>& inner() { return inner_; }

 private:
  evaluator<std::remove_cvref_t<E>> inner_;
};

// Symmetry, from the expression's form. A product is symmetric when its chain of factors reads the
// same backwards with each factor transposed (A A and A^T A for a symmetric A, X^T M X for a symmetric
// M); two sparse factors also match when one holds the other's transpose (A21 and A12 of a symmetric
// matrix, given separately). A sum is symmetric when both terms are, or when one is the other's
// transpose with the same coefficient (A + A^T).
template <class T, class Space>
struct factor_id {
  const void* object;
  bool transposed;
  bool symmetric;
  const sparse_matrix<T, Space>* sparse = nullptr;
};

template <class T, class Space>
bool same_factor(const factor_id<T, Space>& x, const factor_id<T, Space>& y) {
  if (x.object == y.object) return x.transposed == y.transposed || x.symmetric;
  if (x.sparse && y.sparse && x.transposed != y.transposed) return x.sparse->is_transpose_of(*y.sparse);
  return false;
}

template <class X>
inline constexpr bool is_product_v = false;
template <class L, class R>
inline constexpr bool is_product_v<product_expr<L, R>> = true;
template <class X>
inline constexpr bool is_sum_v = false;
template <class L, class R>
inline constexpr bool is_sum_v<sum_expr<L, R>> = true;
template <class X>
inline constexpr bool is_transpose_v = false;
template <class E>
inline constexpr bool is_transpose_v<transpose_expr<E>> = true;
template <class X>
inline constexpr bool is_scaled_v = false;
template <class E>
inline constexpr bool is_scaled_v<scaled_expr<E>> = true;

template <class X>
bool is_symmetric(const X& x);

template <class X>
inline constexpr bool is_diagonal_v = false;
template <class T, class Space>
inline constexpr bool is_diagonal_v<diagonal_matrix<T, Space>> = true;

// The diagonal terms of x's top-level sum, times coef, added into d (n entries in the space; `any` set
// when there is one), and their evaluators switched off in ev. Returns whether x is diagonal alone.
template <class X, class T = typename X::value_type, class Space = typename X::space>
bool split_diagonal(const X& x, evaluator<X>& ev, T coef, T* d, bool& any) {
  if constexpr (is_diagonal_v<X>) {
    auto& c = *x.context_ptr();
    if (x.is_identity()) {
      matrix<T, Space> ones(x.rows(), 1, x.context_ptr());
      fill(c, ones.data(), std::size_t(x.rows()), T(1));
      axpy(c, std::size_t(x.rows()), coef, ones.data(), d);
    } else {
      axpy(c, std::size_t(x.rows()), coef, x.entries(), d);
    }
    any = true;
    return true;
  } else if constexpr (is_scaled_v<X>) {
    return split_diagonal(x.inner, ev.inner(), T(coef * x.s), d, any);
  } else if constexpr (is_transpose_v<X>) {
    return split_diagonal(x.inner, ev.inner(), coef, d, any);  // a diagonal is its transpose
  } else if constexpr (is_sum_v<X>) {
    const bool l = split_diagonal(x.left, ev.left(), T(coef * x.a), d, any);
    const bool r = split_diagonal(x.right, ev.right(), T(coef * x.b), d, any);
    if (!(l && r)) ev.skip(l, r);
    return l && r;
  } else {
    return false;
  }
}

// The factors of x (or of x^T) as a product chain: products are flattened, transposes pushed down,
// scalars dropped, anything else is one factor.
template <class X, class T = typename X::value_type, class Space = typename X::space>
void factors(const X& x, bool transposed, std::vector<factor_id<T, Space>>& out) {
  if constexpr (is_product_v<X>) {
    if (transposed) factors(x.right, true, out), factors(x.left, true, out);
    else factors(x.left, false, out), factors(x.right, false, out);
  } else if constexpr (is_transpose_v<X>) {
    factors(x.inner, !transposed, out);
  } else if constexpr (is_scaled_v<X>) {
    factors(x.inner, transposed, out);  // a scalar commutes: 2 A A is as symmetric as A A
  } else {
    factor_id<T, Space> id{&x, transposed, is_symmetric(x)};
    if constexpr (std::is_same_v<X, sparse_matrix<T, Space>>) id.sparse = &x;
    out.push_back(id);
  }
}

// The scalar a chain's factors() dropped.
template <class X>
typename X::value_type coefficient(const X& x) {
  if constexpr (is_product_v<X>) return coefficient(x.left) * coefficient(x.right);
  else if constexpr (is_transpose_v<X>) return coefficient(x.inner);
  else if constexpr (is_scaled_v<X>) return x.s * coefficient(x.inner);
  else return typename X::value_type(1);
}

// Whether chains a and b^T are the same operator, factor by factor.
template <class T, class Space>
bool mirrored(const std::vector<factor_id<T, Space>>& a, std::vector<factor_id<T, Space>> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto bt = b[b.size() - 1 - i];
    bt.transposed = !bt.transposed;
    if (!same_factor(a[i], bt)) return false;
  }
  return true;
}

template <class X>
bool is_symmetric(const X& x) {
  using T = typename X::value_type;
  using Space = typename X::space;
  if (x.rows() != x.cols()) return false;
  if constexpr (std::is_same_v<X, solve_expr<T, Space>>) return true;
  else if constexpr (std::is_same_v<X, matrix<T, Space>>) return false;  // not inspected
  else if constexpr (is_leaf<X>::value) {
    if constexpr (requires { x.symmetric(); }) return x.symmetric();
    else return false;  // a user's operand that does not say
  }
  else if constexpr (is_scaled_v<X> || is_transpose_v<X>) return is_symmetric(x.inner);
  else if constexpr (is_sum_v<X>) {
    if (is_symmetric(x.left) && is_symmetric(x.right)) return true;
    std::vector<factor_id<T, Space>> l, r;
    factors(x.left, false, l), factors(x.right, false, r);
    return x.a * coefficient(x.left) == x.b * coefficient(x.right) && mirrored(l, r);
  } else {
    std::vector<factor_id<T, Space>> chain;
    factors(x, false, chain);
    return mirrored(chain, chain);
  }
}

// The structure hara() uses when the options name none: an operand's, where its shape is the
// expression's (the left factor's first, as A in A * B).
template <class X, class T = typename X::value_type>
const ::h2expr::structure<T>* structure_of(const X& x) {
  const ::h2expr::structure<T>* s = nullptr;
  if constexpr (requires { x.structure(); }) {
    if (!x.structure().empty()) s = &x.structure();
  } else if constexpr (is_scaled_v<X>) {
    s = structure_of(x.inner);
  } else if constexpr (is_transpose_v<X>) {
    s = structure_of(x.inner);
    if (s && !(s->rows() == s->cols())) s = nullptr;  // the transposed structure is not stored
  } else if constexpr (is_sum_v<X> || is_product_v<X>) {
    s = structure_of(x.left);
    if (!s || s->rows() != x.rows() || s->cols() != x.cols()) s = structure_of(x.right);
  }
  if (s && (s->rows() != x.rows() || s->cols() != x.cols())) return nullptr;
  return s;
}

}  // namespace detail

// An expression as a sampler (what hara() and relative_error() sample), with the structure and the
// symmetry deduced from it. A temporary expression moves into the sampler; an lvalue one is referred
// to and must outlive it. A sampler is itself.
template <class T, class Space>
sampler<T, Space> as_sampler(const sampler<T, Space>& s) {
  return s;
}

template <expression E>
  requires(!std::is_same_v<std::remove_cvref_t<E>,
                           sampler<typename std::remove_cvref_t<E>::value_type, typename std::remove_cvref_t<E>::space>>)
auto as_sampler(E&& e) {
  using X = std::remove_cvref_t<E>;
  using T = typename X::value_type;
  using Space = typename X::space;
  struct state {
    detail::stored_t<E> expr;
    detail::evaluator<X> eval;
    bool diagonal_only = false;  // the whole operator is the sampler's diagonal part
    explicit state(E&& x) : expr(std::forward<E>(x)), eval(expr) {}
  };
  auto st = std::make_shared<state>(std::forward<E>(e));
  const X& x = st->expr;
  auto ctx = detail::context_of(x);
  matrix<T, Space> diagonal;
  if (x.rows() == x.cols()) {
    bool any = false;
    diagonal = matrix<T, Space>(x.rows(), 1, ctx);
    st->diagonal_only = detail::split_diagonal(x, st->eval, T(1), diagonal.data(), any);
    if (!any) diagonal = matrix<T, Space>();
  }
  auto product = [st](detail::op t, detail::padded_order<Space> o = {}) {
    return [st, t, o](const_view<T, Space> in, view<T, Space> out) {
      if (st->diagonal_only) {  // the function's part is zero
        auto& c = *detail::context_of(st->expr);
        if (out.ld() == out.rows()) detail::fill(c, out.data(), std::size_t(out.rows() * out.cols()), T(0));
        else
          for (index j = 0; j < out.cols(); ++j) detail::fill(c, out.data() + j * out.ld(), std::size_t(out.rows()), T(0));
      } else {
        st->eval.apply(t, T(1), in, T(0), out, o);
      }
    };
  };
  const bool symmetric = detail::is_symmetric(x);
  sampler<T, Space> s = symmetric ? sampler<T, Space>(x.rows(), product(detail::op::none), ctx)
                                  : sampler<T, Space>(x.rows(), x.cols(), product(detail::op::none),
                                                      product(detail::op::transpose), ctx);
  if (const auto* structure = detail::structure_of(x)) {
    s.with_structure(*structure);
    // The same products in the padded order of the structure's tree, when an H2 operand lives on that
    // tree and every operand is n x n (so that every inner block is n rows too).
    detail::padded_order<Space> o;
    bool square = x.rows() == x.cols() && structure->symmetric_trees();
    detail::for_each_leaf(x, [&](const auto& leaf) {
      square = square && leaf.rows() == x.rows() && leaf.cols() == x.rows();
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(leaf)>, h2_matrix<T, Space>>)
        if (o.user() && leaf.data().structure.symmetric_trees() &&
            leaf.data().structure.row_tree().same_clusters(structure->row_tree()))
          o = leaf.data().padded();
    });
    if (square && !o.user())
      s.with_tree_products(o, product(detail::op::none, o),
                           product(symmetric ? detail::op::none : detail::op::transpose, o));
  }
  if (diagonal.rows() > 0) s.with_diagonal(std::move(diagonal));
  return s;
}

// Y = E X: the expression applied to a block of vectors, evaluated in one pass.
template <expression E, class T, class Space>
matrix<T, Space> operator*(E&& e, const matrix<T, Space>& X) {
  using Ex = std::remove_cvref_t<E>;
  static_assert(std::is_same_v<typename Ex::value_type, T>,
                "h2expr: an expression and the vectors it multiplies have different value types");
  static_assert(std::is_same_v<typename Ex::space, Space>,
                "h2expr: an expression and the vectors it multiplies live in different spaces");
  detail::require<dimension_mismatch>(X.rows() == e.cols(), "product: the operator is " + detail::shape(e) +
                                                                ", the vectors " + detail::shape(X));
  auto ctx = detail::context_of(e);
  auto Y = matrix<T, Space>::uninitialized(e.rows(), X.cols(), ctx);
  if (Y.rows() == 0 || Y.cols() == 0) return Y;
  if (X.rows() == 0) {
    detail::fill(*ctx, Y.data(), std::size_t(Y.rows() * Y.cols()), T(0));
    return Y;
  }
  detail::evaluator<Ex> eval(e);
  eval.apply(detail::op::none, T(1), X.view(), T(0), Y.view());
  return Y;
}

// The dense matrix of an expression, on the host; for small operators (it multiplies the identity's
// columns, a block at a time).
template <expression E>
  requires(!detail::is_dense_v<std::remove_cvref_t<E>> &&
           !std::is_same_v<std::remove_cvref_t<E>, h2_matrix<typename std::remove_cvref_t<E>::value_type,
                                                              typename std::remove_cvref_t<E>::space>>)
auto to_dense(E&& e) {
  using T = typename std::remove_cvref_t<E>::value_type;
  using Space = typename std::remove_cvref_t<E>::space;
  return detail::dense_by_columns<T>(e.rows(), e.cols(), detail::context_of(e),
                                     [&](const matrix<T, Space>& unit) { return e * unit; });
}

}  // namespace h2expr
