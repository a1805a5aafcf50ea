#pragma once
// Krylov solves with any expression as the operator and as the preconditioner, on blocks of
// right-hand sides: one recurrence per column, the products batched over the block.
//
//   auto r = hx::cg(A, B, 1e-8);                                // A symmetric positive definite
//   auto q = hx::cg(A, B, 1e-8, {.max_iterations = 2000}, X);   // X: any expression, e.g. inverse(A, 1e-2)
//   auto g = hx::gmres(A, B, 1e-8);                             // any non-singular A (restarted)
//   // r.x: the solutions; r.iterations; r.residual: max_j ||b_j - A x_j|| / ||b_j||
//
// A column stops when its relative residual ||b_j - A x_j|| / ||b_j|| is at most tol, checked on the
// true residual, not the recurrence's. A solve that does not get there raises numerical_failure naming
// the residual it reached: after max_iterations products, or where the recurrence breaks down (cg:
// p^T A p <= 0, an operator that is not positive definite, or a singular one).
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/expressions/evaluate.hpp>
#include <h2expr/detail/expressions/expression.hpp>
#include <h2expr/detail/operands/columns.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/randomized/sampler.hpp>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {

// Members in this order, so designated initializers work in any subset.
struct solver_options {
  int max_iterations = 1000;  // operator products per right-hand side (gmres: over all restarts)
  int restart = 30;           // gmres: the Krylov space's dimension before it restarts
  bool verbose = false;       // a line per iteration on std::clog: the largest relative residual
};

template <class T, class Space>
struct solve_result {
  matrix<T, Space> x;     // the solutions, one column per right-hand side
  int iterations = 0;     // operator products per column
  double residual = 0;    // max_j ||b_j - A x_j|| / ||b_j|| (true residuals)
  double seconds = 0;
};

namespace detail {

// The checks and the state cg and gmres share.
template <class T, class Space>
struct krylov_problem {
  const sampler<T, Space>& A;
  const sampler<T, Space>* M;  // preconditioner, or none
  const matrix<T, Space>& B;
  double tol;
  const solver_options& o;
  context_ptr<Space> ctx;
  index n = 0;
  int r = 0;
  std::vector<double> bnorm;

  krylov_problem(const char* name, const sampler<T, Space>& a, const sampler<T, Space>* m, const matrix<T, Space>& b,
                 double t, const solver_options& opt)
      : A(a), M(m), B(b), tol(t), o(opt), ctx(a.context_ptr()), n(a.rows()), r(int(b.cols())) {
    const std::string who(name);
    require<invalid_tolerance>(std::isfinite(tol) && tol > 0 && tol < 1,
                               who + ": the tolerance must be in (0, 1), got " + number(tol));
    require(o.max_iterations >= 1, who + ": max_iterations must be >= 1 (got " + std::to_string(o.max_iterations) + ")");
    require(o.restart >= 1, who + ": restart must be >= 1 (got " + std::to_string(o.restart) + ")");
    require<dimension_mismatch>(A.rows() == A.cols(), who + ": the operator is " + std::to_string(A.rows()) + " x " +
                                                          std::to_string(A.cols()) + ", not square");
    require<dimension_mismatch>(B.rows() == n, who + ": the operator is " + std::to_string(n) + " x " +
                                                   std::to_string(n) + ", the right-hand sides " +
                                                   std::to_string(B.rows()) + " x " + std::to_string(B.cols()));
    require<dimension_mismatch>(!M || (M->rows() == n && M->cols() == n),
                                who + ": the preconditioner is " + (M ? shape(*M) : std::string()) +
                                    ", the operator " + std::to_string(n) + " x " + std::to_string(n));
    require_blas_sizes<T, Space>(B.view(), name);
    require<non_finite_value>(B.size() == 0 || all_finite(B.context(), B.data(), std::size_t(B.size())),
                              who + ": the right-hand sides have entries that are not finite");
    bnorm = column_norms<T, Space>(ctx, B.view());
  }
  matrix<T, Space> zeros() const { return matrix<T, Space>(n, r, ctx); }
  matrix<T, Space> apply(const sampler<T, Space>& op, const matrix<T, Space>& x) const {
    auto y = matrix<T, Space>::uninitialized(n, r, ctx);
    op.apply(x.view(), y.view());
    return y;
  }
  // B - A X, and max_j of its relative column norms (per column in rel).
  matrix<T, Space> residual(const matrix<T, Space>& X, std::vector<double>& rel) const {
    auto R = matrix<T, Space>(B);
    if (r > 0) {
      auto AX = apply(A, X);
      axpy(*ctx, std::size_t(n) * r, T(-1), AX.data(), R.data());
    }
    rel = relative(column_norms<T, Space>(ctx, R.view()));
    return R;
  }
  std::vector<double> relative(std::vector<double> norms) const {
    for (int j = 0; j < r; ++j) norms[j] = bnorm[j] > 0 ? norms[j] / bnorm[j] : norms[j];
    return norms;
  }
  static double largest(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::isfinite(x) ? x : HUGE_VAL);
    return m;
  }
  void log(const char* name, int it, double res) const {
    if (o.verbose) std::clog << name << ": iteration " << it << ", largest relative residual " << res << std::endl;
  }
  [[noreturn]] void fail(const char* name, int it, double res, const std::string& why) const {
    throw numerical_failure(std::string(name) + ": " + why + " after " + std::to_string(it) +
                            " iterations, at a largest relative residual of " + number(res) + " (tol " +
                            number(tol) + ")");
  }
};

template <class T, class Space>
solve_result<T, Space> cg(const sampler<T, Space>& A, const sampler<T, Space>* M, const matrix<T, Space>& B, double tol,
                          const solver_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  krylov_problem<T, Space> p("cg", A, M, B, tol, o);
  const int r = p.r;
  solve_result<T, Space> out;
  out.x = p.zeros();
  std::vector<double> rel;
  auto R = p.residual(out.x, rel);
  int it = 0;
  for (;;) {  // one pass per restart from the true residual (the recurrence's drifts in rounding)
    std::vector<char> active(static_cast<std::size_t>(r));
    for (int j = 0; j < r; ++j) active[j] = rel[j] > tol;
    if (std::none_of(active.begin(), active.end(), [](char a) { return a; })) break;
    if (it >= o.max_iterations) p.fail("cg", it, p.largest(rel), "no convergence");
    auto Z = M ? p.apply(*M, R) : matrix<T, Space>(R);
    auto P = matrix<T, Space>(Z);
    auto rz = column_dots<T, Space>(p.ctx, R.view(), Z.view());
    for (; it < o.max_iterations;) {
      auto AP = p.apply(A, P);
      ++it;
      const auto pap = column_dots<T, Space>(p.ctx, P.view(), AP.view());
      std::vector<T> alpha(std::size_t(r), T(0)), minus(std::size_t(r), T(0));
      for (int j = 0; j < r; ++j) {
        if (!active[j]) continue;
        if (!(pap[j] > 0) || !(rz[j] > 0))
          p.fail("cg", it, p.largest(rel),
                 !(rz[j] > 0) ? "r^T M r <= 0: the preconditioner is not positive definite"
                              : "p^T A p <= 0: the operator is not positive definite (or is singular)");
        alpha[j] = T(rz[j] / pap[j]), minus[j] = -alpha[j];
      }
      column_axpy<T, Space>(p.ctx, alpha, P.view(), out.x.view());
      column_axpy<T, Space>(p.ctx, minus, AP.view(), R.view());
      rel = p.relative(column_norms<T, Space>(p.ctx, R.view()));
      p.log("cg", it, p.largest(rel));
      bool any = false;
      for (int j = 0; j < r; ++j) active[j] = active[j] && rel[j] > tol, any = any || active[j];
      if (!any) break;
      Z = M ? p.apply(*M, R) : matrix<T, Space>(R);
      const auto rz_next = column_dots<T, Space>(p.ctx, R.view(), Z.view());
      std::vector<T> beta(std::size_t(r), T(0));
      for (int j = 0; j < r; ++j)
        if (active[j]) beta[j] = T(rz_next[j] / rz[j]);
      rz = rz_next;
      column_axpy<T, Space>(p.ctx, beta, P.view(), Z.view());  // P = Z + beta P
      P = std::move(Z);
    }
    R = p.residual(out.x, rel);  // the true residual decides
  }
  out.iterations = it;
  out.residual = p.largest(rel);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

// GMRES(m) with right preconditioning (A M u = b, x = M u: the residual it minimizes is the true one),
// modified Gram-Schmidt, Givens rotations per column on the host.
template <class T, class Space>
solve_result<T, Space> gmres(const sampler<T, Space>& A, const sampler<T, Space>* M, const matrix<T, Space>& B,
                             double tol, const solver_options& o) {
  const auto t0 = std::chrono::steady_clock::now();
  krylov_problem<T, Space> p("gmres", A, M, B, tol, o);
  const int r = p.r, m = o.restart;
  solve_result<T, Space> out;
  out.x = p.zeros();
  std::vector<double> rel;
  auto R = p.residual(out.x, rel);
  int it = 0;
  for (;;) {
    std::vector<char> active(static_cast<std::size_t>(r));
    for (int j = 0; j < r; ++j) active[j] = rel[j] > tol;
    if (std::none_of(active.begin(), active.end(), [](char a) { return a; })) break;
    if (it >= o.max_iterations) p.fail("gmres", it, p.largest(rel), "no convergence");
    const auto beta = column_norms<T, Space>(p.ctx, R.view());
    std::vector<matrix<T, Space>> V;
    V.push_back(p.zeros());
    {
      std::vector<T> s(std::size_t(r), T(0));
      for (int j = 0; j < r; ++j) s[j] = active[j] && beta[j] > 0 ? T(1 / beta[j]) : T(0);
      column_axpy<T, Space>(p.ctx, s, R.view(), V[0].view());
    }
    // Per column: H (upper Hessenberg, rotated to triangular), the rotations, g, and its steps.
    std::vector<Eigen::MatrixXd> H(std::size_t(r), Eigen::MatrixXd::Zero(m + 1, m));
    std::vector<Eigen::VectorXd> cs(std::size_t(r), Eigen::VectorXd::Zero(m)), sn = cs;
    std::vector<Eigen::VectorXd> g(std::size_t(r), Eigen::VectorXd::Zero(m + 1));
    std::vector<int> steps(std::size_t(r), 0);
    std::vector<char> open = active;  // columns whose Krylov space still grows
    for (int j = 0; j < r; ++j) g[j](0) = beta[j];
    for (int k = 0; k < m && it < o.max_iterations; ++k) {
      auto W = p.apply(A, M ? p.apply(*M, V[k]) : V[k]);
      ++it;
      for (int i = 0; i <= k; ++i) {
        const auto h = column_dots<T, Space>(p.ctx, V[i].view(), W.view());
        std::vector<T> minus(std::size_t(r), T(0));
        for (int j = 0; j < r; ++j)
          if (open[j]) H[j](i, k) = h[j], minus[j] = T(-h[j]);
        column_axpy<T, Space>(p.ctx, minus, V[i].view(), W.view());
      }
      const auto hn = column_norms<T, Space>(p.ctx, W.view());
      std::vector<T> s(std::size_t(r), T(0));
      double worst = 0;
      for (int j = 0; j < r; ++j) {
        if (!open[j]) continue;
        auto& h = H[j];
        h(k + 1, k) = hn[j];
        for (int i = 0; i < k; ++i) {  // the earlier rotations
          const double a = h(i, k), b = h(i + 1, k);
          h(i, k) = cs[j](i) * a + sn[j](i) * b, h(i + 1, k) = -sn[j](i) * a + cs[j](i) * b;
        }
        const double a = h(k, k), b = h(k + 1, k), rho = std::hypot(a, b);
        cs[j](k) = rho > 0 ? a / rho : 1, sn[j](k) = rho > 0 ? b / rho : 0;
        h(k, k) = rho, h(k + 1, k) = 0;
        g[j](k + 1) = -sn[j](k) * g[j](k), g[j](k) = cs[j](k) * g[j](k);
        steps[j] = k + 1;
        const double est = p.bnorm[j] > 0 ? std::abs(g[j](k + 1)) / p.bnorm[j] : 0;
        worst = std::max(worst, est);
        // Stop growing where converged, or where the space is invariant (hn = 0: the solution is in it).
        if (est <= tol || !(hn[j] > 1e-300) || !(rho > 0)) open[j] = 0;
        else s[j] = T(1 / hn[j]);
      }
      p.log("gmres", it, worst);
      if (std::none_of(open.begin(), open.end(), [](char a) { return a; })) break;
      V.push_back(p.zeros());
      column_axpy<T, Space>(p.ctx, s, W.view(), V[k + 1].view());
    }
    // x += M V y, y from the triangular systems.
    std::vector<Eigen::VectorXd> y(static_cast<std::size_t>(r));
    int kmax = 0;
    for (int j = 0; j < r; ++j) {
      if (!active[j] || steps[j] == 0) continue;
      const int kj = steps[j];
      y[j] = g[j].head(kj);
      H[j].topLeftCorner(kj, kj).triangularView<Eigen::Upper>().solveInPlace(y[j]);
      if (!y[j].allFinite())
        p.fail("gmres", it, p.largest(rel), "a singular Hessenberg matrix (the operator is singular)");
      kmax = std::max(kmax, kj);
    }
    auto U = p.zeros();
    for (int i = 0; i < kmax; ++i) {  // U_j = sum_i y_j(i) V_i,j: one update of all columns per i
      std::vector<T> s(std::size_t(r), T(0));
      for (int j = 0; j < r; ++j)
        if (i < y[j].size()) s[j] = T(y[j](i));
      column_axpy<T, Space>(p.ctx, s, V[i].view(), U.view());
    }
    if (M) U = p.apply(*M, U);
    axpy(*p.ctx, std::size_t(p.n) * r, T(1), U.data(), out.x.data());
    R = p.residual(out.x, rel);
  }
  out.iterations = it;
  out.residual = p.largest(rel);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace detail

template <class E>
using vectors_of = matrix<typename std::remove_cvref_t<E>::value_type, typename std::remove_cvref_t<E>::space>;

namespace detail {
template <class E, class P>
constexpr void check_preconditioner() {
  using X = std::remove_cvref_t<E>;
  using Y = std::remove_cvref_t<P>;
  static_assert(std::is_same_v<typename X::value_type, typename Y::value_type>,
                "h2expr: the operator and the preconditioner have different value types");
  static_assert(std::is_same_v<typename X::space, typename Y::space>,
                "h2expr: the operator and the preconditioner live in different spaces");
}
}  // namespace detail

// Conjugate gradients for a symmetric positive definite operator (any expression) on the columns of B;
// the preconditioner, when given, any symmetric positive definite expression (an H2 inverse).
template <expression E>
auto cg(E&& A, const vectors_of<E>& B, double tol, const solver_options& o = {}) {
  const auto a = as_sampler(std::forward<E>(A));
  return detail::cg(a, static_cast<const decltype(a)*>(nullptr), B, tol, o);
}
template <expression E, expression P>
auto cg(E&& A, const vectors_of<E>& B, double tol, const solver_options& o, P&& preconditioner) {
  detail::check_preconditioner<E, P>();
  const auto a = as_sampler(std::forward<E>(A));
  const auto m = as_sampler(std::forward<P>(preconditioner));
  return detail::cg(a, &m, B, tol, o);
}

// Restarted GMRES for any non-singular operator (any expression) on the columns of B, preconditioned on
// the right by any expression when given.
template <expression E>
auto gmres(E&& A, const vectors_of<E>& B, double tol, const solver_options& o = {}) {
  const auto a = as_sampler(std::forward<E>(A));
  return detail::gmres(a, static_cast<const decltype(a)*>(nullptr), B, tol, o);
}
template <expression E, expression P>
auto gmres(E&& A, const vectors_of<E>& B, double tol, const solver_options& o, P&& preconditioner) {
  detail::check_preconditioner<E, P>();
  const auto a = as_sampler(std::forward<E>(A));
  const auto m = as_sampler(std::forward<P>(preconditioner));
  return detail::gmres(a, &m, B, tol, o);
}

}  // namespace h2expr
