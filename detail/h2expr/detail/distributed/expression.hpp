#pragma once
// Expressions of distributed operands: A * B, A + B, A - B, alpha * A, transpose(A) of distributed H2
// matrices (and of such expressions), lazy, as the single-process ones are: an expression holds its
// operands by reference and applies them, right to left, to this rank's rows of a block of vectors,
// one distributed product per operand. Every operand must be split alike (the same points, the same
// ranks: checked at the first product, on every rank). relative_error and frobenius_estimate of them
// are collective and give the single process's values (the same probes: random_entry).
#include <h2expr/detail/distributed/h2_matrix.hpp>
#include <h2expr/detail/distributed/norm.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr::distributed {

template <class T, class Space = host>
class expression : public h2expr::detail::values_in_space<T, Space> {
 public:
  using apply_fn = std::function<void(detail::op, const_view<T, Space>, view<T, Space>)>;

  // A (not a copy: A must outlive the expression).
  expression(const h2_matrix<T, Space>& A) : data_(&A.data()), leaf_(&A.data()), symmetric_(A.data().symmetric) {  // NOLINT: implicit
    detail::require<missing_structure>(data_->comm != nullptr, "distributed expression: the matrix is empty (default-constructed)");
    const auto* d = data_;
    apply_ = [d](detail::op o, const_view<T, Space> x, view<T, Space> y) { detail::distributed_hgemv(*d, o, T(1), x, T(0), y); };
  }

  index rows() const { return data_->structure.rows(); }
  index cols() const { return data_->structure.cols(); }
  index local_rows() const { return index(data_->local_indices.size()); }
  const std::vector<index>& local_indices() const { return data_->local_indices; }
  const detail::distributed_data<T, Space>& layout() const { return *data_; }  // the first operand's split
  // Known to be symmetric: a symmetric matrix, A A of one, sums, multiples and transposes of such.
  bool symmetric() const { return symmetric_; }

  // Collective: Y = op(E) X, X and Y this rank's rows.
  void apply(detail::op o, const_view<T, Space> X, view<T, Space> Y) const {
    if (!checked_) {  // once: every operand split like the first, on every rank
      data_->comm->agree("distributed expression", {}, mismatch_);
      checked_ = true;
    }
    apply_(o, X, Y);
  }
  matrix<T, Space> operator*(const matrix<T, Space>& X) const { return times(detail::op::none, X); }
  matrix<T, Space> times(detail::op o, const matrix<T, Space>& X) const {
    auto Y = matrix<T, Space>::uninitialized(local_rows(), X.cols(), data_->ctx);
    apply(o, X.view(), Y.view());
    return Y;
  }

  // The composite nodes: apply is the composition.
  static expression compose(const expression& a, const expression& b, apply_fn f, bool symmetric) {
    expression e(a);
    e.apply_ = std::move(f);
    e.checked_ = false;
    e.leaf_ = nullptr;
    e.symmetric_ = symmetric;
    if (!e.mismatch_) e.mismatch_ = b.mismatch_;
    if (!e.mismatch_ && (a.rows() != b.rows() || a.data_->comm->size() != b.data_->comm->size() ||
                         a.local_indices() != b.local_indices()))
      e.mismatch_ = {detail::rank_failure::dimensions,
                     "distributed expression: operands of " + std::to_string(a.rows()) + " and " + std::to_string(b.rows()) +
                         " rows, or split over the ranks differently (build them from the same points on the same ranks)"};
    return e;
  }
  static expression map(const expression& a, apply_fn f) {  // alpha A, A^T: as symmetric as A
    expression e(a);
    e.apply_ = std::move(f);
    e.leaf_ = nullptr;
    return e;
  }
  // The matrix itself when the expression is one (not a product or sum of it), else null.
  const detail::distributed_data<T, Space>* leaf() const { return leaf_; }

 private:
  const detail::distributed_data<T, Space>* data_ = nullptr;
  const detail::distributed_data<T, Space>* leaf_ = nullptr;
  bool symmetric_ = false;
  apply_fn apply_;
  detail::rank_failure mismatch_;
  mutable bool checked_ = false;
};

template <class X>
struct is_operand : std::false_type {};
template <class T, class Space>
struct is_operand<h2_matrix<T, Space>> : std::true_type {};
template <class T, class Space>
struct is_operand<expression<T, Space>> : std::true_type {};
template <class X>
concept operand = is_operand<std::remove_cvref_t<X>>::value;

template <class T, class Space>
expression<T, Space> as_expression(const h2_matrix<T, Space>& A) {
  return expression<T, Space>(A);
}
template <class T, class Space>
const expression<T, Space>& as_expression(const expression<T, Space>& e) {
  return e;
}

// A B: B first (A^T: A^T first).
template <operand A, operand B>
auto operator*(const A& a_, const B& b_) {
  auto a = as_expression(a_), b = as_expression(b_);
  using E = decltype(a);
  using T = typename E::value_type;
  using Space = typename E::space;
  const bool symmetric = a.symmetric() && a.leaf() != nullptr && a.leaf() == b.leaf();  // A A, A symmetric
  return E::compose(
      a, b,
      [a, b](detail::op o, const_view<T, Space> x, view<T, Space> y) {
        auto tmp = matrix<T, Space>::uninitialized(x.rows(), x.cols(), a.layout().ctx);
        if (o == detail::op::none) b.apply(o, x, tmp.view()), a.apply(o, tmp.view(), y);
        else a.apply(o, x, tmp.view()), b.apply(o, tmp.view(), y);
      },
      symmetric);
}

namespace expression_detail {
template <operand A, operand B>
auto combine(const A& a_, const B& b_, double beta) {
  auto a = as_expression(a_), b = as_expression(b_);
  using E = decltype(a);
  using T = typename E::value_type;
  using Space = typename E::space;
  return E::compose(
      a, b,
      [a, b, beta](detail::op o, const_view<T, Space> x, view<T, Space> y) {
        auto tmp = matrix<T, Space>::uninitialized(y.rows(), y.cols(), a.layout().ctx);
        a.apply(o, x, y);
        b.apply(o, x, tmp.view());
        if (y.rows() > 0 && y.cols() > 0)
          detail::axpby_2d(*a.layout().ctx, std::size_t(y.rows()), std::size_t(y.cols()), T(beta), tmp.data(),
                           std::size_t(tmp.rows()), T(1), y.data(), std::size_t(y.ld()));
      },
      a.symmetric() && b.symmetric());
}
}  // namespace expression_detail

template <operand A, operand B>
auto operator+(const A& a, const B& b) {
  return expression_detail::combine(a, b, 1.0);
}
template <operand A, operand B>
auto operator-(const A& a, const B& b) {
  return expression_detail::combine(a, b, -1.0);
}
template <operand A>
auto operator*(double alpha, const A& a_) {
  auto a = as_expression(a_);
  using E = decltype(a);
  using T = typename E::value_type;
  using Space = typename E::space;
  return E::map(a, [a, alpha](detail::op o, const_view<T, Space> x, view<T, Space> y) {
    a.apply(o, x, y);
    if (y.rows() > 0 && y.cols() > 0) detail::scale_2d(*a.layout().ctx, y.rows(), y.cols(), T(alpha), y.data(), y.ld());
  });
}

template <operand A, class T, class Space>
matrix<T, Space> operator*(const A& a, const matrix<T, Space>& X)
  requires(!std::is_same_v<std::remove_cvref_t<A>, h2_matrix<T, Space>>)
{
  return as_expression(a).times(detail::op::none, X);
}

}  // namespace h2expr::distributed

namespace h2expr {

// transpose(A) of a distributed matrix or expression: applied from the same storage.
template <distributed::operand A>
auto transpose(const A& a_) {
  auto a = distributed::as_expression(a_);
  using E = decltype(a);
  using T = typename E::value_type;
  using Space = typename E::space;
  return E::map(a, [a](detail::op o, const_view<T, Space> x, view<T, Space> y) {
    a.apply(o == detail::op::none ? detail::op::transpose : detail::op::none, x, y);
  });
}

namespace detail {
// relative_error's estimate (operations/hara.hpp) on the ranks: the single process's probes (entry i of a
// column depends on the user's index i alone), its sums added over the ranks in rank order.
template <class T, class Space>
double distributed_probe(const distributed::expression<T, Space>& P, const distributed::expression<T, Space>& M,
                               int probes, std::uint64_t seed) {
  const auto& d = M.layout();
  rank_failure bad;
  if (P.rows() != M.rows() || P.local_indices() != M.local_indices())
    bad = {rank_failure::dimensions, "relative_error: " + std::to_string(P.rows()) + " vs " + std::to_string(M.rows()) +
                                         " rows, or split over the ranks differently"};
  else if (probes < 1)
    bad = {rank_failure::invalid, "relative_error: probes must be >= 1"};
  d.comm->agree("distributed relative_error", {{"probes", probes}, {"the seed", std::int64_t(seed)}}, bad);
  const distributed_vectors vectors{*d.comm, M.local_indices(), M.cols()};
  const auto X = vectors.random<T, Space>(d.ctx, M.local_rows(), probes, seed);
  const auto Yp = to_dense(P * X), Ym = to_dense(M * X);
  double sums[2] = {(Yp.template cast<double>() - Ym.template cast<double>()).squaredNorm(),  // ||(P - M) X||_F^2, ||M X||_F^2
                    Ym.template cast<double>().squaredNorm()};
  d.comm->sum_in_rank_order(sums, 2);
  return sums[1] > 0 ? std::sqrt(sums[0] / sums[1]) : std::sqrt(sums[0]);
}
}  // namespace detail

// Collective: relative_error (operations/hara.hpp) of distributed operands: the same value on every
// rank, and the single process's for the same operators (to rounding).
template <distributed::operand A, distributed::operand B>
double relative_error(const A& approx, const B& exact, int probes = 10, std::uint64_t seed = 0x2f6b1e3a9c4d5e87ull) {
  return detail::distributed_probe(distributed::as_expression(approx), distributed::as_expression(exact), probes, seed);
}

// Collective: frobenius_estimate of a distributed operand (the single process's probes).
template <distributed::operand E>
double frobenius_estimate(const E& e_, int probes = 10, std::uint64_t seed = 0x2f6b1e3a9c4d5e87ull) {
  const auto e = distributed::as_expression(e_);
  using T = typename std::remove_cvref_t<decltype(e)>::value_type;
  using Space = typename std::remove_cvref_t<decltype(e)>::space;
  const auto& d = e.layout();
  d.comm->agree("distributed frobenius_estimate", {{"probes", probes}, {"the seed", std::int64_t(seed)}},
                probes >= 1 ? detail::rank_failure{} : detail::rank_failure{detail::rank_failure::invalid, "frobenius_estimate: probes must be >= 1"});
  const detail::distributed_vectors vectors{*d.comm, e.local_indices(), e.cols()};
  const auto Y = e * vectors.template random<T, Space>(d.ctx, e.local_rows(), probes, seed);
  double s = detail::sum_of_squares(Y.context(), Y.data(), std::size_t(Y.size()));
  d.comm->sum_in_rank_order(&s, 1);
  const double f = std::sqrt(s / probes);
  detail::require<non_finite_value>(std::isfinite(f), "frobenius_estimate: the operator's products are not finite");
  return f;
}

}  // namespace h2expr
