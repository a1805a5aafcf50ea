#pragma once
// Diagonal operands (identity, diagonal), the Newton-Schulz inverse and the Krylov solves (cg, gmres)
// against dense Eigen analogues, for every (scalar, space): products, hara() with the diagonal put in
// exactly, ||I - A X|| of the inverse falling with tol (2D and 3D, symmetric and general), solves that
// reach the requested residual, preconditioned in fewer iterations, and bad input (singular operators).
#include <h2expr/diagonal_matrix.hpp>
#include <h2expr/expression.hpp>
#include <h2expr/hara.hpp>
#include <h2expr/inverse.hpp>
#include <h2expr/krylov.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "instances/hara.hpp"
#include "support.hpp"

namespace h2expr::test {

template <class C>
class solvers_test : public space_test<C> {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  using space_test<C>::ctx_;
  static constexpr bool single = std::is_same_v<T, float>;

  // The covariance of an exponential kernel on a jittered 2D grid (symmetric positive definite).
  h2_matrix<T, Space> covariance(int side, double length, std::uint64_t salt) {
    const auto pts = point_cloud<T, 2>::grid({side, side}, T(0.2), test_seed() + salt);
    return h2_matrix<T, Space>::from_kernel(pts, kernels::exponential{length},
                                            {.leaf_size = 32, .eta = 0.9, .cheb_points = 8}, ctx_);
  }
  // ||I - a x||_F / sqrt(n).
  static double dense_residual(const dense<double>& a, const dense<double>& x) {
    const auto n = a.rows();
    return (dense<double>::Identity(n, n) - a * x).norm() / std::sqrt(double(n));
  }
  // The largest relative residual of the columns of a x = b.
  static double solve_residual(const dense<double>& a, const dense<double>& x, const dense<double>& b) {
    double worst = 0;
    for (Eigen::Index j = 0; j < b.cols(); ++j)
      worst = std::max(worst, (b.col(j) - a * x.col(j)).norm() / b.col(j).norm());
    return worst;
  }
  matrix<T, Space> column(const dense<T>& d) { return matrix<T, Space>(d, ctx_); }
};
TYPED_TEST_SUITE_P(solvers_test);

// identity and diagonal in expressions, times vectors, against dense.
TYPED_TEST_P(solvers_test, diagonal_operands_against_dense) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto A = this->covariance(16, 0.2, 1);
  const int n = int(A.rows());
  const dense<double> a = to_dense(A).template cast<double>();
  rng r(3);
  const dense<T> d = r.template normal<T>(n, 1);
  const auto I = identity<T, Space>(n, this->ctx_);
  const auto D = diagonal(this->column(d));
  const dense<double> dd = d.template cast<double>().col(0).asDiagonal();
  const dense<T> x = r.template normal<T>(n, 3);
  const matrix<T, Space> X(x, this->ctx_);
  const double bound = tol<T>(this->single ? 50 : 1000);
  auto check = [&](auto&& e, const dense<double>& m, const char* what) {
    EXPECT_LT(relative_error(to_dense(e * X), m * x.template cast<double>()), bound) << what;
    EXPECT_LT(relative_error(to_dense(transpose(e) * X), m.transpose() * x.template cast<double>()), bound) << what;
  };
  const dense<double> id = dense<double>::Identity(n, n);
  check(I, id, "I");
  check(D, dd, "D");
  check(A + 0.5 * I, a + 0.5 * id, "A + 0.5 I");
  check(2 * I - A + D, 2 * id - a + dd, "2 I - A + D");
  check(D * A - I * A, dd * a - a, "D A - I A");
  check(A * (I - 0.25 * A), a * (id - 0.25 * a), "A (I - A / 4)");
  // The sampler of a sum carries its diagonal terms as its exact diagonal part, and samples the rest.
  const auto s = as_sampler(A + 0.5 * I - 2 * D);
  ASSERT_NE(s.diagonal(), nullptr);
  EXPECT_TRUE(s.symmetric());
  EXPECT_TRUE(s.structure() == A.structure());
  EXPECT_LT(relative_error(to_dense(s.diagonal()->view()), (0.5 - 2 * d.template cast<double>().array()).matrix()),
            bound);
  auto Y = matrix<T, Space>::uninitialized(n, 3, this->ctx_);
  s.apply_off_diagonal(X.view(), Y.view());
  EXPECT_LT(relative_error(to_dense(Y.view()), a * x.template cast<double>()), bound);
  s.apply(X.view(), Y.view());
  EXPECT_LT(relative_error(to_dense(Y.view()), (a + 0.5 * id - 2 * dd) * x.template cast<double>()), bound);
  EXPECT_EQ(as_sampler(A * (A + I)).diagonal(), nullptr);  // only terms of the top-level sum
}

// hara() of sums with diagonal terms: the diagonal enters the dense leaves exactly, the rest is sampled.
TYPED_TEST_P(solvers_test, hara_puts_diagonal_terms_in_exactly) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto A = this->covariance(20, 0.15, 2);
  const int n = int(A.rows());
  const dense<double> a = to_dense(A).template cast<double>();
  rng r(5);
  const dense<T> d = (r.template normal<T>(n, 1).array().abs() * T(3)).matrix();
  const dense<double> dd = d.template cast<double>().col(0).asDiagonal();
  const dense<double> id = dense<double>::Identity(n, n);
  const auto I = identity<T, Space>(n, this->ctx_);
  const auto D = diagonal(this->column(d));
  const std::vector<double> tols = this->single ? std::vector<double>{1e-2, 1e-3} : std::vector<double>{1e-3, 1e-6};
  double last = 1;
  for (double tol : tols) {
    auto P = hara(A + 1e-2 * I + D, tol, {.seed = test_seed()});
    const double e = relative_error(to_dense(P), a + 1e-2 * id + dd);
    EXPECT_LT(e, 2 * tol) << tol;
    EXPECT_LT(e, last) << tol;
    last = e;
  }
  // A diagonal alone is copied, not approximated: exact to rounding at any tolerance.
  auto Q = hara(T(2.5) * I - D, 1e-2, {.structure = A.structure(), .seed = test_seed()});
  EXPECT_LT(relative_error(to_dense(Q), 2.5 * id - dd), tol<T>(10));
  // A lambda sampler with a diagonal part.
  auto S = dense_sampler<T, Space>(a.template cast<T>(), true, this->ctx_);
  S.with_structure(A.structure()).with_diagonal(this->column(d));
  const double tol = this->single ? 1e-3 : 1e-6;
  EXPECT_LT(relative_error(to_dense(hara(S, tol, {.seed = test_seed()})), a + dd), 2 * tol);
}

// Newton-Schulz: ||I - A X|| below tol and falling with it, for a covariance matrix with a nugget (2D,
// X symmetric), a 3D one, and a non-symmetric kernel matrix.
TYPED_TEST_P(solvers_test, inverse_residual_follows_the_tolerance) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  // In float a step's hara tolerance stops at 10 eps = 1.2e-6 (inverse.hpp), which these kernels'
  // condition numbers (~1e3) reach for residuals near 1e-3: float is tested to 1e-2.
  const std::vector<double> tols = this->single ? std::vector<double>{1e-1, 1e-2} : std::vector<double>{1e-2, 1e-4, 1e-6};
  // The 3D and non-symmetric problems run the first two tolerances only: under the sanitizers each
  // inverse costs 30x its Release time (the CI budget, issue 17).
  auto run = [&](const auto& op, const dense<double>& a, bool symmetric, const char* what, std::size_t count) {
    double last = 1, first = 0;
    for (std::size_t i = 0; i < std::min(count, tols.size()); ++i) {
      const double tol = tols[i];
      const auto t0 = std::chrono::steady_clock::now();
      inverse_report rep;
      auto X = inverse(op, tol, {.report = &rep});
      EXPECT_EQ(X.symmetric(), symmetric) << what;
      EXPECT_EQ(rep.transposed_start, !symmetric) << what;
      const double res = this->dense_residual(a, to_dense(X).template cast<double>());
      EXPECT_LT(res, 2 * tol) << what << ", tol " << tol << ", estimate " << rep.residual.back();
      // Quadratic convergence stops below tol by a step's squaring: two tolerances may end on one step.
      EXPECT_LT(res, 1.5 * last) << what << ", tol " << tol;
      EXPECT_LE(rep.residual.back(), tol) << what;
      EXPECT_EQ(int(rep.residual.size()), rep.iterations + 1) << what;
      EXPECT_EQ(int(rep.hara_error.size()), rep.iterations) << what;
      EXPECT_EQ(int(rep.steps.size()), rep.iterations) << what;
      ASSERT_EQ(int(rep.scaling.size()), rep.iterations) << what;
      ASSERT_EQ(int(rep.top.size()), rep.iterations + 1) << what;
      ASSERT_EQ(int(rep.order.size()), rep.iterations) << what;
      for (std::size_t k = 0; k < rep.order.size(); ++k) {
        // Order 3 only for a plain step meant to be the last (cubing, not squaring, brings it to tol).
        EXPECT_TRUE(rep.order[k] == 2 || rep.order[k] == 3) << what << ", step " << k + 1;
        if (rep.order[k] == 3) EXPECT_TRUE(k > 0 && rep.scaling[k] == 1.0) << what << ", step " << k + 1;
      }
      for (double t : rep.top) EXPECT_TRUE(t > 0 && t <= 1.5) << what << ": top of A X's spectrum " << t;
      for (std::size_t k = 0; k < rep.scaling.size(); ++k) {
        // Scaled steps stay where beta A X_k's spectrum stays below 2: beta in [1, 2 / 1.1], plain late on.
        EXPECT_GE(rep.scaling[k], 1.0) << what << ", step " << k + 1;
        EXPECT_LE(rep.scaling[k], 2 / 1.1 + 1e-12) << what << ", step " << k + 1;
        if (rep.residual[k] <= 0.9) EXPECT_EQ(rep.scaling[k], 1.0) << what << ", step " << k + 1;
      }
      for (std::size_t k = 0; k < rep.hara_error.size(); ++k) {
        // What hara's error added is measured, finite, and (the step accepted) kept the residual falling.
        EXPECT_TRUE(std::isfinite(rep.hara_error[k]) && rep.hara_error[k] >= 0) << what << ", step " << k + 1;
        EXPECT_GT(rep.steps[k].samples, 0) << what << ", step " << k + 1;
      }
      last = res, first = i == 0 ? res : first;
      std::printf("%s, tol %g: %d steps (the last of order %d), residual %.2e, %.2f s\n", what, tol, rep.iterations,
                  rep.order.back(), res,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    EXPECT_LT(last, first / 10) << what << ": the residual did not fall with the tolerance";
  };
  auto K = this->covariance(20, 0.15, 3);
  const int n = int(K.rows());
  const dense<double> id = dense<double>::Identity(n, n);
  const auto I = identity<T, Space>(n, this->ctx_);
  run(K + 0.1 * I, to_dense(K).template cast<double>() + 0.1 * id, true, "2D covariance + 0.1 I", 3);
  {
    const auto pts = point_cloud<T, 3>::grid({7, 7, 7}, T(0.2), test_seed() + 4);
    auto G = h2_matrix<T, Space>::from_kernel(pts, kernels::exponential{0.2}, {.leaf_size = 32, .cheb_points = 4},
                                              this->ctx_);
    const auto J = identity<T, Space>(G.rows(), this->ctx_);
    const dense<double> g = to_dense(G).template cast<double>();
    run(G + 0.1 * J, g + 0.1 * dense<double>::Identity(g.rows(), g.cols()), true, "3D covariance + 0.1 I", 2);
  }
  {
    const auto pts = point_cloud<T, 2>::grid({18, 18}, T(0.2), test_seed() + 5);
    auto B = h2_matrix<T, Space>::from_kernel(pts, skewed_kernel(0.1), {.leaf_size = 32, .cheb_points = 8}, this->ctx_);
    const auto J = identity<T, Space>(B.rows(), this->ctx_);
    const dense<double> b = to_dense(B).template cast<double>();
    run(B + J, b + dense<double>::Identity(b.rows(), b.cols()), false, "non-symmetric kernel + I", 2);
  }
}

// cg and gmres reach the requested residual on blocks of right-hand sides; with the inverse at 1e-2
// as preconditioner, in fewer iterations.
TYPED_TEST_P(solvers_test, krylov_solves_reach_the_residual) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const double tol = this->single ? 1e-4 : 1e-8;
  rng r(9);
  {
    auto K = this->covariance(20, 0.15, 6);
    const int n = int(K.rows());
    const auto I = identity<T, Space>(n, this->ctx_);
    auto A = hara(K + 1e-2 * I, this->single ? 1e-5 : 1e-10, {.seed = test_seed()});
    const dense<double> a = to_dense(A).template cast<double>();
    const dense<T> b = r.template normal<T>(n, 3);
    const matrix<T, Space> B(b, this->ctx_);
    auto plain = cg(A, B, tol);
    EXPECT_LE(plain.residual, tol);
    EXPECT_LT(this->solve_residual(a, to_dense(plain.x).template cast<double>(), b.template cast<double>()), 2 * tol);
    auto X = inverse(A, 1e-2);
    auto pre = cg(A, B, tol, {}, X);
    EXPECT_LE(pre.residual, tol);
    EXPECT_LT(this->solve_residual(a, to_dense(pre.x).template cast<double>(), b.template cast<double>()), 2 * tol);
    EXPECT_LT(pre.iterations, plain.iterations) << "preconditioned " << pre.iterations << ", plain " << plain.iterations;
    std::printf("cg: %d iterations, preconditioned by inverse(A, 1e-2) %d\n", plain.iterations, pre.iterations);
    EXPECT_LE(pre.iterations, 10);
    // A loose inverse, and a Newton-Schulz step applied on it instead of built (P = 2 X - X A X, whose
    // residual I - A P = (I - A X)^2): CG takes fewer iterations with each, and the solution stays right.
    auto L = inverse(A, 0.9);
    auto loose = cg(A, B, tol, {}, L);
    auto applied = cg(A, B, tol, {}, 2.0 * L - L * A * L);
    for (const auto* q : {&loose, &applied}) {
      EXPECT_LE(q->residual, tol);
      EXPECT_LT(this->solve_residual(a, to_dense(q->x).template cast<double>(), b.template cast<double>()), 2 * tol);
    }
    std::printf("cg preconditioned by inverse(A, 0.9): %d iterations; by 2 X - X A X of it: %d\n", loose.iterations,
                applied.iterations);
    EXPECT_LT(loose.iterations, plain.iterations);
    EXPECT_LT(applied.iterations, loose.iterations);
    // An expression as the operator: the same system, unassembled.
    auto e = cg(K + 1e-2 * I, B, tol, {.max_iterations = 2000}, X);
    EXPECT_LE(e.residual, tol);
    // gmres on the symmetric system too.
    auto g = gmres(A, B, tol, {}, X);
    EXPECT_LT(this->solve_residual(a, to_dense(g.x).template cast<double>(), b.template cast<double>()), 2 * tol);
  }
  {
    const auto pts = point_cloud<T, 2>::grid({18, 18}, T(0.2), test_seed() + 7);
    auto B = h2_matrix<T, Space>::from_kernel(pts, skewed_kernel(0.1), {.leaf_size = 32, .cheb_points = 8}, this->ctx_);
    const int n = int(B.rows());
    const auto I = identity<T, Space>(n, this->ctx_);
    const dense<double> a = to_dense(B).template cast<double>() + dense<double>::Identity(n, n);
    const dense<T> rhs = r.template normal<T>(n, 2);
    const matrix<T, Space> R(rhs, this->ctx_);
    auto plain = gmres(B + I, R, tol, {.restart = 20});
    EXPECT_LE(plain.residual, tol);
    EXPECT_LT(this->solve_residual(a, to_dense(plain.x).template cast<double>(), rhs.template cast<double>()), 2 * tol);
    auto X = inverse(B + I, 1e-2);
    auto pre = gmres(B + I, R, tol, {.restart = 20}, X);
    EXPECT_LE(pre.residual, tol);
    EXPECT_LT(this->solve_residual(a, to_dense(pre.x).template cast<double>(), rhs.template cast<double>()), 2 * tol);
    EXPECT_LT(pre.iterations, plain.iterations);
    std::printf("gmres: %d iterations, preconditioned by inverse(A, 1e-2) %d\n", plain.iterations, pre.iterations);
  }
}

TYPED_TEST_P(solvers_test, bad_input_is_a_clear_error) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto K = this->covariance(12, 0.2, 8);
  const int n = int(K.rows());
  const auto I = identity<T, Space>(n, this->ctx_);
  EXPECT_THROW((identity<T, Space>(-1, this->ctx_)), error);
  EXPECT_THROW(diagonal(matrix<T, Space>(n, 2, this->ctx_)), dimension_mismatch);
  dense<T> bad = dense<T>::Ones(n, 1);
  bad(3, 0) = std::numeric_limits<T>::quiet_NaN();
  EXPECT_THROW(diagonal(this->column(bad)), non_finite_value);
  EXPECT_THROW((K + identity<T, Space>(n + 1, this->ctx_)), dimension_mismatch);
  const matrix<T, Space> B(dense<T>::Ones(n, 2), this->ctx_);
  const matrix<T, Space> wrong(dense<T>::Ones(n + 1, 2), this->ctx_);
  EXPECT_THROW(cg(K, wrong, 1e-4), dimension_mismatch);
  EXPECT_THROW(cg(K, B, 0.0), invalid_tolerance);
  EXPECT_THROW(gmres(K, B, 1.5), invalid_tolerance);
  EXPECT_THROW(cg(K, B, 1e-4, {.max_iterations = 0}), error);
  EXPECT_THROW(inverse(K, 0.0), invalid_tolerance);
  EXPECT_THROW(inverse(K, 1e-2, {.max_iterations = 0}), error);
  EXPECT_THROW(inverse(K, 1e-2, {.max_order = 4}), error);
  auto nan_rhs = dense<T>::Ones(n, 1).eval();
  nan_rhs(0, 0) = std::numeric_limits<T>::infinity();
  EXPECT_THROW(cg(K, matrix<T, Space>(nan_rhs, this->ctx_), 1e-4), non_finite_value);
  // A lambda without structure cannot be inverted; a zero operator neither.
  EXPECT_THROW(inverse(dense_sampler<T, Space>(dense<T>::Identity(n, n), true, this->ctx_), 1e-2), missing_structure);
  EXPECT_THROW(inverse(K - K, 1e-2), numerical_failure);
  // Singular operators: the rank-one u u^T (cg breaks down or stalls, gmres stalls, the inverse's
  // residual cannot fall), each within its iteration bound.
  const dense<T> u = dense<T>::Ones(n, 1);
  auto rank_one = dense_sampler<T, Space>(u * u.transpose(), true, this->ctx_);
  rank_one.with_structure(K.structure());
  const matrix<T, Space> rhs(rng(10).template normal<T>(n, 1), this->ctx_);
  EXPECT_THROW(cg(rank_one, rhs, 1e-6, {.max_iterations = 50}), numerical_failure);
  EXPECT_THROW(gmres(rank_one, rhs, 1e-6, {.max_iterations = 50}), numerical_failure);
  try {
    inverse(rank_one, 1e-3, {.max_iterations = 40});
    ADD_FAILURE() << "no numerical_failure for a singular operator";
  } catch (const numerical_failure& e) {
    EXPECT_NE(std::string(e.what()).find("residual"), std::string::npos) << e.what();
  }
  // A step whose samples exceed the space's memory (a limit of 64 KB): out of memory with the step and
  // the residual reached, and the report up to there.
  {
    scoped_memory_limit limit(*this->ctx_, std::size_t(64) << 10);
    inverse_report rep;
    try {
      inverse(K + T(0.1) * I, 1e-2, {.report = &rep});
      ADD_FAILURE() << "no device_out_of_memory";
    } catch (const device_out_of_memory& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("step 1"), std::string::npos) << what;
      EXPECT_NE(what.find("samples"), std::string::npos) << what;
      EXPECT_EQ(rep.residual.size(), 1u);
    }
  }
}

// A last step of order 3 (where squaring the residual would not reach tol, cubing it does) saves the
// squaring step that would follow, and meets tol as well: over a sweep of tolerances some end so.
TYPED_TEST_P(solvers_test, inverse_cubes_a_last_step_that_squaring_would_not_end) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto K = this->covariance(20, 0.15, 3);
  const int n = int(K.rows());
  const auto I = identity<T, Space>(n, this->ctx_);
  const auto C = K + T(0.1) * I;
  const dense<double> a = to_dense(K).template cast<double>() + 0.1 * dense<double>::Identity(n, n);
  int cubed = 0;
  for (double tol : {0.3, 0.2, 0.12, 0.07, 0.04}) {
    inverse_report three, two;
    const auto X = inverse(C, tol, {.report = &three});
    const auto Y = inverse(C, tol, {.report = &two, .max_order = 2});
    EXPECT_LT(this->dense_residual(a, to_dense(X).template cast<double>()), 2 * tol) << tol;
    EXPECT_LE(three.residual.back(), tol) << tol;
    for (int order : two.order) EXPECT_EQ(order, 2) << tol;
    if (three.order.back() != 3) continue;
    ++cubed;
    // The same steps up to the cubed one, which ends where squaring needs as many or more.
    EXPECT_LE(three.iterations, two.iterations) << tol;
    for (int k = 0; k + 1 < three.iterations; ++k) EXPECT_EQ(three.order[std::size_t(k)], 2) << tol << ", step " << k + 1;
    std::printf("tol %g: cubed the last of %d steps (%d squaring); residual %.3f after %.3f\n", tol, three.iterations,
                two.iterations, three.residual.back(), three.residual[three.residual.size() - 2]);
  }
  EXPECT_GT(cubed, 0) << "no tolerance of the sweep ended on a cubed step";
}

REGISTER_TYPED_TEST_SUITE_P(solvers_test, diagonal_operands_against_dense, hara_puts_diagonal_terms_in_exactly,
                            inverse_residual_follows_the_tolerance, inverse_cubes_a_last_step_that_squaring_would_not_end,
                            krylov_solves_reach_the_residual, bad_input_is_a_clear_error);

}  // namespace h2expr::test
