#pragma once
// The expression DSL against dense Eigen analogues, for every (scalar, space): every node type and
// nestings of them times vectors (and transposed), through hara(), the symmetry and structure hara()
// deduces, Schur complements of 2D and 3D Poisson problems, and bad input.
#include <h2expr/cholesky.hpp>
#include <h2expr/expression.hpp>
#include <h2expr/hara.hpp>
#include <h2expr/sparse_matrix.hpp>

#include <Eigen/Sparse>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "../examples/poisson.hpp"
#include "instances/hara.hpp"
#include "reference.hpp"
#include "support.hpp"

// A user's operator type declared outside namespace h2expr, not a template of h2expr types: with
// h2expr::operand_base, argument-dependent lookup finds h2expr's operators from code outside h2expr.
struct global_host_operator : h2expr::operand_base {
  using value_type = double;
  using space = h2expr::host;
  h2expr::matrix<double> M;
  h2expr::index rows() const { return M.rows(); }
  h2expr::index cols() const { return M.cols(); }
  h2expr::context_ptr<h2expr::host> context_ptr() const { return M.context_ptr(); }
  void apply(h2expr::op t, double alpha, h2expr::const_view<double> in, double beta, h2expr::view<double> out) const {
    h2expr::detail::gemm_strided_batched(M.context(), t, h2expr::op::none, int(out.rows()), int(in.cols()),
                                         int(in.rows()), alpha, M.data(), int(M.rows()), 0, in.data(), int(in.ld()),
                                         0, beta, out.data(), int(out.ld()), 0, 1);
  }
};
// 2 U + U U - U^T - (-U), written where only argument-dependent lookup can find the operators.
inline auto global_forms(const global_host_operator& U) { return 2 * U + U * U - transpose(U) - (-U); }

namespace h2expr::test {

// A user's own operator type (the concept h2expr::operand): a dense matrix applied by its own product,
// with a symmetry it declares. Nothing in h2expr names it.
template <class T, class Space>
struct user_dense_operator {
  using value_type = T;
  using space = Space;
  matrix<T, Space> M;
  bool declared_symmetric = false;
  index rows() const { return M.rows(); }
  index cols() const { return M.cols(); }
  ::h2expr::context_ptr<Space> context_ptr() const { return M.context_ptr(); }
  bool symmetric() const { return declared_symmetric; }
  void apply(op t, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) const {
    ++calls;
    detail::gemm_strided_batched(M.context(), t, op::none, int(out.rows()), int(in.cols()), int(in.rows()), alpha,
                                 M.data(), int(M.rows()), 0, in.data(), int(in.ld()), 0, beta, out.data(),
                                 int(out.ld()), 0, 1);
  }
  mutable int calls = 0;
};
// Without symmetric() and structure() it is an operand too; without apply it is not.
template <class T, class Space>
struct user_minimal_operator {
  using value_type = T;
  using space = Space;
  index rows() const { return 1; }
  index cols() const { return 1; }
  ::h2expr::context_ptr<Space> context_ptr() const { return default_context<Space>(); }
  void apply(op, T, const_view<T, Space>, T, view<T, Space>) const {}
};
template <class T, class Space>
struct not_an_operator {
  using value_type = T;
  using space = Space;
  index rows() const { return 1; }
  index cols() const { return 1; }
};

template <class C>
class expression_test : public space_test<C> {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  using space_test<C>::ctx_;
  static constexpr bool single = std::is_same_v<T, float>;
  static constexpr int grid = 18;  // operators of grid^2 points

  void SetUp() override {
    space_test<C>::SetUp();
    if (!ctx_) return;
    pts_ = point_cloud<T, 2>::grid({grid, grid}, T(0.2), test_seed());
    const build_options bo{.leaf_size = 32, .eta = 0.9, .cheb_points = 8};
    A_ = h2_matrix<T, Space>::from_kernel(*pts_, kernels::exponential{0.15}, bo, ctx_);
    B_ = h2_matrix<T, Space>::from_kernel(*pts_, skewed_kernel(0.25), bo, ctx_);
    a_ = to_dense(A_).template cast<double>();
    b_ = to_dense(B_).template cast<double>();
  }

  // A sparse n x n matrix with a few random entries per row.
  Eigen::SparseMatrix<T> random_sparse(int n, int per_row, std::uint64_t salt) {
    rng r(salt);
    std::vector<Eigen::Triplet<T>> t;
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < per_row; ++k) t.emplace_back(i, r.uniform_int(0, n - 1), T(r.uniform_int(-100, 100)) / T(50));
    Eigen::SparseMatrix<T> S(n, n);
    S.setFromTriplets(t.begin(), t.end());
    return S;
  }

  // The 5-point Laplacian of the grid x grid points (symmetric positive definite).
  static Eigen::SparseMatrix<T> laplacian() {
    Eigen::SparseMatrix<T> L(grid * grid, grid * grid);
    std::vector<Eigen::Triplet<T>> t;
    for (int j = 0; j < grid; ++j)
      for (int i = 0; i < grid; ++i) {
        const int g = i + grid * j;
        t.emplace_back(g, g, T(4));
        if (i > 0) t.emplace_back(g, g - 1, T(-1)), t.emplace_back(g - 1, g, T(-1));
        if (j > 0) t.emplace_back(g, g - grid, T(-1)), t.emplace_back(g - grid, g, T(-1));
      }
    L.setFromTriplets(t.begin(), t.end());
    return L;
  }

  // E X and E^T X against the dense analogue M.
  template <class E>
  void expect_products(E&& e, const dense<double>& M, const std::string& what) {
    ASSERT_EQ(e.rows(), M.rows()) << what;
    ASSERT_EQ(e.cols(), M.cols()) << what;
    rng r(7);
    const dense<T> x = r.template normal<T>(M.cols(), 5), y = r.template normal<T>(M.rows(), 4);
    const double bound = h2expr::test::tol<T>(single ? 50 : 1000);
    EXPECT_LT(relative_error(to_dense(e * matrix<T, Space>(x, ctx_)), M * x.template cast<double>()), bound) << what;
    EXPECT_LT(relative_error(to_dense(transpose(e) * matrix<T, Space>(y, ctx_)),
                             M.transpose() * y.template cast<double>()),
              bound)
        << what << " transposed";
  }

  sampler<T, Space> dense_sampler(const dense<T>& M) { return test::dense_sampler(M, false, ctx_); }

  std::optional<point_cloud<T, 2>> pts_;  // no default constructor
  h2_matrix<T, Space> A_, B_;
  dense<double> a_, b_;
};
TYPED_TEST_SUITE_P(expression_test);

// Every node type over every leaf type, times vectors and transposed.
TYPED_TEST_P(expression_test, every_node_type_against_dense) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const auto& A = this->A_;
  const auto& B = this->B_;
  const auto& a = this->a_;
  const auto& b = this->b_;
  const int n = int(A.rows());
  rng r(11);
  const dense<T> d = r.template normal<T>(n, n) / T(n);
  const matrix<T, Space> D(d, this->ctx_);
  const auto se = this->random_sparse(n, 4, 12);
  const auto S = sparse_matrix<T, Space>::from_eigen(se, this->ctx_);
  const dense<T> g = r.template normal<T>(n, n) / T(n);
  const auto G = this->dense_sampler(g);
  const auto lap = this->laplacian();
  const dense<double> ld = lap.toDense().template cast<double>();
  const dense<double> dd = d.template cast<double>(), sd = se.toDense().template cast<double>(),
                      gd = g.template cast<double>();

  this->expect_products(A + B, a + b, "A + B");
  this->expect_products(A - B, a - b, "A - B");
  this->expect_products(-B, -b, "-B");
  this->expect_products(2.5 * B, 2.5 * b, "2.5 B");
  this->expect_products(B * 0.5f, 0.5 * b, "B 0.5");
  this->expect_products(B / 4, b / 4, "B / 4");
  this->expect_products(A * B, a * b, "A B");
  this->expect_products(transpose(B), b.transpose(), "B^T");
  this->expect_products(transpose(A * B), (a * b).transpose(), "(A B)^T");
  this->expect_products(transpose(transpose(B)), b, "(B^T)^T");
  this->expect_products(D, dd, "dense D");
  this->expect_products(A + D * B, a + dd * b, "A + D B");
  this->expect_products(S, sd, "sparse S");
  this->expect_products(S * A, sd * a, "S A");
  this->expect_products(A * S, a * sd, "A S");
  this->expect_products(S * A - transpose(S), sd * a - sd.transpose(), "S A - S^T");
  this->expect_products(G, gd, "sampler G");
  this->expect_products(G * B + 3 * G, gd * b + 3 * gd, "G B + 3 G");
  const auto F = cholesky(sparse_matrix<T, Space>::from_eigen(lap, this->ctx_));
  this->expect_products(solve(F), ld.inverse(), "solve(cholesky(L))");
  this->expect_products(A - 2 * solve(F) * B, a - 2 * ld.inverse() * b, "A - 2 L^{-1} B");
  // The nestings of the issue.
  this->expect_products(A + 2 * transpose(B) - A * B, a + 2 * b.transpose() - a * b, "A + 2 B^T - A B");
  this->expect_products(A * B * A, a * b * a, "A B A");
  this->expect_products(0.5 * G + 2 * this->dense_sampler(d) - G * G, 0.5 * gd + 2 * dd - gd * gd,
                        "scaled sums of samplers");
  // A named sub-expression used twice.
  auto AB = A * B;
  this->expect_products(AB + transpose(AB), a * b + (a * b).transpose(), "AB + (AB)^T");
  // to_dense multiplies the identity a block of columns at a time: blocks of 7 (the last one short)
  // give what one block does, for an H2 matrix and for an expression.
  const auto by_7 = [&](const auto& M) {
    return detail::dense_by_columns<T>(n, n, this->ctx_, [&](const matrix<T, Space>& unit) { return M * unit; }, 7);
  };
  const double eps = std::numeric_limits<T>::epsilon();
  EXPECT_LT((by_7(A) - to_dense(A)).template cast<double>().norm(), 100 * eps * a.norm());
  EXPECT_LT((by_7(A * B - D).template cast<double>() - (a * b - dd)).norm(), 1e-4 * (a * b - dd).norm());
}

// The same expressions rebuilt by hara(): the error follows the tolerance.
TYPED_TEST_P(expression_test, hara_of_expressions) {
  using T = typename TypeParam::scalar;
  const auto& A = this->A_;
  const auto& B = this->B_;
  const auto& a = this->a_;
  const auto& b = this->b_;
  const std::vector<double> tols = this->single ? std::vector<double>{1e-2, 1e-3} : std::vector<double>{1e-2, 1e-6};
  double last_sum = 1, last_triple = 1;
  for (double tol : tols) {
    auto Q = hara(A + 2 * transpose(B) - A * B, tol, {.seed = test_seed()});
    const double e1 = relative_error(to_dense(Q), a + 2 * b.transpose() - a * b);
    EXPECT_LT(e1, 2 * tol) << "A + 2 B^T - A B, tol " << tol;
    EXPECT_LT(e1, last_sum) << tol;
    last_sum = e1;
    auto P = hara(A * B * A, tol, {.seed = test_seed() + 1});
    const double e2 = relative_error(to_dense(P), a * b * a);
    EXPECT_LT(e2, 2 * tol) << "A B A, tol " << tol;
    EXPECT_LT(e2, last_triple) << tol;
    last_triple = e2;
    // The randomized estimate against the dense error it estimates.
    const double est = h2expr::relative_error(P, A * B * A, 10, test_seed());
    EXPECT_LT(est, 3 * e2) << "tol " << tol;
    EXPECT_GT(est, e2 / 3) << "tol " << tol;
  }
  // A scaled sum of samplers, with the structure given.
  const int n = int(A.rows());
  dense<T> k(n, n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) k(i, j) = kernels::gaussian{0.3}((*this->pts_)[i], (*this->pts_)[j]);
  const auto K = this->dense_sampler(k);
  const double tol = this->single ? 1e-3 : 1e-6;
  auto P = hara(3 * K - 0.5 * transpose(K), tol, {.structure = A.structure(), .seed = test_seed()});
  EXPECT_LT(relative_error(to_dense(P), 2.5 * k.template cast<double>()), 2 * tol);
}

// What hara() deduces from an expression's form: symmetry (it then samples half) and structure.
TYPED_TEST_P(expression_test, symmetry_and_structure_are_deduced) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const auto& A = this->A_;
  const auto& B = this->B_;
  EXPECT_TRUE(as_sampler(A * A).symmetric());
  EXPECT_TRUE(as_sampler(A + 2 * A * A).symmetric());
  EXPECT_FALSE(as_sampler(A * B).symmetric());
  EXPECT_TRUE(as_sampler(B + transpose(B)).symmetric());
  EXPECT_FALSE(as_sampler(B + 2 * transpose(B)).symmetric());
  EXPECT_TRUE(as_sampler(transpose(B) * B).symmetric());
  EXPECT_TRUE(as_sampler(B * transpose(B)).symmetric());
  EXPECT_TRUE(as_sampler(transpose(B) * A * B).symmetric());
  EXPECT_FALSE(as_sampler(transpose(B) * A * A).symmetric());
  // Sparse blocks given separately are matched by content: X^T M X with X^T stored on its own.
  auto p = examples::poisson_schur_problem<T, 2>(8);
  const auto A11 = sparse_matrix<T, Space>::from_eigen(p.A11, this->ctx_);
  const auto A12 = sparse_matrix<T, Space>::from_eigen(p.A12, this->ctx_);
  const auto A21 = sparse_matrix<T, Space>::from_eigen(p.A21, this->ctx_);
  const auto A22 = sparse_matrix<T, Space>::from_eigen(p.A22, this->ctx_);
  const auto F = cholesky(A11);
  EXPECT_TRUE(as_sampler(A22 - A21 * solve(F) * A12).symmetric());
  EXPECT_FALSE(as_sampler(A22 - A21 * solve(F) * A12 * A22).symmetric());
  // Structure: an operand's of the expression's shape; none from sparse operands alone.
  EXPECT_TRUE(as_sampler(A * B).structure() == A.structure());
  EXPECT_TRUE(as_sampler(2 * transpose(B) + A).structure() == B.structure());
  EXPECT_TRUE(as_sampler(A22 - A21 * solve(F) * A12).structure().empty());
  EXPECT_THROW(hara(A22 - A21 * solve(F) * A12, 1e-3), missing_structure);
  // What the caller knows: A (3 I - A A (3 I - A)) is symmetric, though no sum of symmetric terms nor a
  // palindrome. Declared so, its transpose products are its products, and hara samples half.
  const auto I = identity<T, Space>(A.rows(), this->ctx_);
  auto cubic = as_sampler(A * (T(3) * I - A * A * (T(3) * I - A)));
  EXPECT_FALSE(cubic.symmetric());
  const auto hint = cubic.tree_order();
  cubic.assume_symmetric();
  EXPECT_TRUE(cubic.symmetric());
  EXPECT_FALSE(cubic.tree_order().user());
  EXPECT_EQ(cubic.tree_order().np, hint.np);
  const index n = A.rows();
  rng r(43);
  const auto X = matrix<T, Space>(r.template normal<T>(n, 3), this->ctx_);
  auto Y = matrix<T, Space>::uninitialized(n, 3, this->ctx_), Yt = matrix<T, Space>::uninitialized(n, 3, this->ctx_);
  cubic.apply(X.view(), Y.view());
  cubic.apply_transpose(X.view(), Yt.view());
  // The same product twice: bitwise equal on the host; on the GPU the block-sparse products sum their
  // blocks' contributions with atomics, in an order that varies from run to run (seen on an H200:
  // 1.1e-16 in double, 5.9e-8 in float), so there equal to rounding.
  const double same = std::is_same_v<Space, host> ? 0.0 : 8 * std::numeric_limits<T>::epsilon();
  EXPECT_LE(relative_error(to_dense(Yt).template cast<double>(), to_dense(Y).template cast<double>()), same);
  hara_report hr, hs;
  const double tol = this->single ? 1e-3 : 1e-6;
  const auto P = hara(A * (T(3) * I - A * A * (T(3) * I - A)), tol, {.seed = test_seed(), .report = &hr});
  const auto Q = hara(cubic, tol, {.seed = test_seed(), .report = &hs});
  EXPECT_FALSE(P.symmetric());
  EXPECT_TRUE(Q.symmetric());
  EXPECT_LT(hs.samples, hr.samples);
  const dense<double> a = to_dense(A).template cast<double>(), id = dense<double>::Identity(n, n);
  const dense<double> exact = a * (3 * id - a * a * (3 * id - a));
  EXPECT_LT(relative_error(to_dense(Q), exact), 2 * tol);
  // Only a square operator can be symmetric.
  auto wide = sampler<T, Space>(n, 2 * n, [](const_view<T, Space>, view<T, Space>) {},
                                [](const_view<T, Space>, view<T, Space>) {}, this->ctx_);
  EXPECT_THROW(wide.assume_symmetric(), dimension_mismatch);
}

// Schur complements of 2D and 3D Poisson problems (the HARA paper's third experiment) against the
// dense Schur complement, at two tolerances.
TYPED_TEST_P(expression_test, schur_complements_of_poisson_problems) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const std::vector<double> tols = this->single ? std::vector<double>{1e-2, 1e-3} : std::vector<double>{1e-3, 1e-6};
  auto run = [&](const auto& p, const auto& interface_structure, const char* what) {
    const auto A11 = sparse_matrix<T, Space>::from_eigen(p.A11, this->ctx_);
    const auto A12 = sparse_matrix<T, Space>::from_eigen(p.A12, this->ctx_);
    const auto A21 = sparse_matrix<T, Space>::from_eigen(p.A21, this->ctx_);
    const auto A22 = sparse_matrix<T, Space>::from_eigen(p.A22, this->ctx_);
    dense<double> x;  // A11^{-1} A12, exact to rounding (A11 is SPD)
    ASSERT_TRUE(reference::cholesky_solve(Eigen::SparseMatrix<double>(p.A11.template cast<double>()),
                                          dense<double>(p.A12.toDense().template cast<double>()), x));
    const dense<double> s = p.A22.toDense().template cast<double>() - p.A21.toDense().template cast<double>() * x;
    auto schur = A22 - A21 * solve(cholesky(A11)) * A12;
    this->expect_products(schur, s, what);
    double last = 1;
    for (double tol : tols) {
      hara_report rep;
      auto S = hara(schur, tol, {.structure = interface_structure, .seed = test_seed(), .report = &rep});
      EXPECT_TRUE(S.symmetric()) << what;
      const double err = relative_error(to_dense(S), s);
      EXPECT_LT(err, 2 * tol) << what << ", tol " << tol;
      EXPECT_LT(err, last) << what << ", the error did not fall with tol " << tol;
      last = err;
    }
  };
  {
    auto p = examples::poisson_schur_problem<T, 2>(64);
    run(p, ::h2expr::structure<T>::from_points(point_cloud<T, 1>(p.interface), {.leaf_size = 16}), "2D 64^2");
  }
  {
    auto p = examples::poisson_schur_problem<T, 3>(12);
    run(p, ::h2expr::structure<T>::from_points(point_cloud<T, 2>(p.interface), {.leaf_size = 16, .eta = 0.9}),
        "3D 12^3");
  }
}

TYPED_TEST_P(expression_test, bad_input_is_a_clear_error) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const auto& A = this->A_;
  auto small = h2_matrix<T, Space>::from_kernel(point_cloud<T, 2>::grid({10, 10}, T(0.1), 1),
                                                kernels::exponential{0.1}, {.leaf_size = 32}, this->ctx_);
  auto names_both = [](auto&& f, const std::string& first, const std::string& second) {
    try {
      f();
      ADD_FAILURE() << "no dimension_mismatch";
    } catch (const dimension_mismatch& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(first), std::string::npos) << m;
      EXPECT_NE(m.find(second), std::string::npos) << m;
    }
  };
  const std::string big = std::to_string(A.rows()) + " x " + std::to_string(A.cols()), little = "100 x 100";
  names_both([&] { (void)(A + small); }, big, little);
  names_both([&] { (void)(A - 2 * small); }, big, little);
  names_both([&] { (void)(A * transpose(small)); }, big, little);
  names_both([&] { (void)((A + A) * matrix<T, Space>(100, 2, this->ctx_)); }, big, "100 x 2");
  const auto S = sparse_matrix<T, Space>::from_eigen(this->random_sparse(100, 3, 5), this->ctx_);
  names_both([&] { (void)(A * S); }, big, little);
  // Not symmetric positive definite: the factorization says so.
  Eigen::SparseMatrix<T> indefinite = this->laplacian();
  for (int i = 0; i < 5; ++i) indefinite.coeffRef(i, i) = T(-1);
  EXPECT_THROW(cholesky(sparse_matrix<T, Space>::from_eigen(indefinite, this->ctx_)), not_positive_definite);
  EXPECT_THROW(cholesky(S), error);
}

// A user's operator type in expressions, in hara, and in the symmetry hara deduces.
TYPED_TEST_P(expression_test, user_operands_join_expressions) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  static_assert(operand<user_dense_operator<T, Space>> && expression<user_dense_operator<T, Space>>);
  static_assert(operand<user_minimal_operator<T, Space>>);
  static_assert(!operand<not_an_operator<T, Space>> && !expression<not_an_operator<T, Space>>);
  static_assert(!operand<h2_matrix<T, Space>> && expression<h2_matrix<T, Space>>);  // a built-in leaf
  const auto& A = this->A_;
  const auto& a = this->a_;
  const int n = int(A.rows());
  rng r(31);
  const dense<T> u = r.template normal<T>(n, n) / T(n);
  const dense<double> ud = u.template cast<double>();
  const user_dense_operator<T, Space> U{matrix<T, Space>(u, this->ctx_)};
  this->expect_products(U, ud, "user operand U");
  this->expect_products(A * U - 2 * transpose(U), a * ud - 2 * ud.transpose(), "A U - 2 U^T");
  this->expect_products(user_dense_operator<T, Space>{matrix<T, Space>(u, this->ctx_)} + A, ud + a,
                        "a temporary user operand + A");
  EXPECT_GT(U.calls, 0) << "the operand's own apply was not used";
  // hara of a product with it, on A's structure; its error follows the tolerance.
  const double tol = this->single ? 1e-3 : 1e-6;
  const dense<T> k = (a * a).template cast<T>();  // a smooth operator, so that hara's ranks stay low
  const user_dense_operator<T, Space> K{matrix<T, Space>(k, this->ctx_), true};
  auto P = hara(K + A, tol, {.seed = test_seed()});
  EXPECT_LT(relative_error(to_dense(P), k.template cast<double>() + a), 2 * tol);
  // The symmetry it declares is used; one that declares none is not symmetric.
  EXPECT_TRUE(as_sampler(K + A).symmetric());
  EXPECT_FALSE(as_sampler(U + A).symmetric());
  EXPECT_TRUE(as_sampler(transpose(U) * A * U).symmetric());
  if constexpr (std::is_same_v<T, double> && std::is_same_v<Space, host>) {
    const global_host_operator G{{}, matrix<double>(u.template cast<double>(), this->ctx_)};
    this->expect_products(global_forms(G), 3 * ud + ud * ud - ud.transpose(), "a type outside h2expr");
  }
}

// Samplers of expressions whose H2 operands share a tree also multiply blocks in its padded order (what
// hara uses on that tree): the same products as in the user's order, zero padding rows, every leaf type
// (H2 on the tree, H2 on an equal tree built apart, sparse, dense, samplers, user operands reordered).
TYPED_TEST_P(expression_test, tree_order_products_match_user_order) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const auto& A = this->A_;
  const auto& B = this->B_;  // the same points, its own structure object
  const int n = int(A.rows());
  rng r(41);
  const dense<T> d = r.template normal<T>(n, n) / T(n);
  const matrix<T, Space> D(d, this->ctx_);
  const auto S = sparse_matrix<T, Space>::from_eigen(this->random_sparse(n, 4, 42), this->ctx_);
  const auto G = this->dense_sampler(r.template normal<T>(n, n) / T(n));
  const user_dense_operator<T, Space> U{matrix<T, Space>(d, this->ctx_)};
  auto check = [&](auto&& e, const std::string& what) {
    const auto s = as_sampler(e);
    const auto& o = s.tree_order();
    ASSERT_FALSE(o.user()) << what;
    ASSERT_EQ(o.n, n);
    const std::vector<int> map = A.data().arrays->padded_to_user.to_host();  // o's order: A's tree
    ASSERT_EQ(index(map.size()), o.np);
    auto& c = *this->ctx_;
    const int k = 6;
    const auto X = matrix<T, Space>(r.template normal<T>(n, k), this->ctx_);
    auto Xp = matrix<T, Space>::uninitialized(o.np, k, this->ctx_);
    detail::gather_rows(c, o.map, o.np, X.data(), n, Xp.data(), o.np, k);
    for (op t : {op::none, op::transpose}) {
      auto Y = matrix<T, Space>::uninitialized(n, k, this->ctx_), Yp = matrix<T, Space>::uninitialized(o.np, k, this->ctx_);
      if (t == op::none) s.apply_off_diagonal(X.view(), Y.view());
      else s.apply_transpose_off_diagonal(X.view(), Y.view());
      s.tree_apply(t, Xp.view(), Yp.view());
      auto back = matrix<T, Space>::uninitialized(n, k, this->ctx_);
      detail::scatter_rows(c, o.map, o.np, Yp.data(), o.np, back.data(), n, k);
      const dense<double> y = to_dense(Y).template cast<double>();
      EXPECT_LT(relative_error(to_dense(back).template cast<double>(), y), h2expr::test::tol<T>(10)) << what << " " << int(t);
      // Padding rows stay zero (the next product reads them).
      const dense<T> yp = to_dense(Yp);
      double padding = 0;
      for (index i = 0; i < o.np; ++i)
        if (map[std::size_t(i)] < 0) padding += yp.row(i).template cast<double>().norm();
      EXPECT_EQ(padding, 0.0) << what;
    }
  };
  check(A * A, "A A");
  check(A * B, "A B (two equal trees)");
  check(A + 2 * transpose(B) - A * B * A, "A + 2 B^T - A B A");
  check(A * S - transpose(S) + D * B, "A S - S^T + D B (reordered leaves)");
  check(G * A + 0.5 * U, "G A + U / 2 (a sampler and a user operand)");
  check(A + 0.25 * identity<T, Space>(n, this->ctx_), "A + I / 4 (diagonal part apart)");
  const auto I = identity<T, Space>(n, this->ctx_);
  check(A * (T(3) * I - B * A * (T(3) * I - B)), "A (3 I - B A (3 I - B)) (the identity inside products)");
  // No padded order where there is no H2 operand, or where a leaf is not n x n.
  EXPECT_TRUE(as_sampler(S * D).tree_order().user());
  // hara on the tree gives what it gives from the same products in the user's order (the same samples).
  const double tol = this->single ? 1e-3 : 1e-6;
  const auto product = A * B * A;
  const auto user = as_sampler(product);
  auto f = [&](const_view<T, Space> in, view<T, Space> out) { user.apply(in, out); };
  auto ft = [&](const_view<T, Space> in, view<T, Space> out) { user.apply_transpose(in, out); };
  const sampler<T, Space> plain(n, n, f, ft, this->ctx_);
  const auto P = hara(product, tol, {.seed = test_seed()});
  const auto Q = hara(plain, tol, {.structure = A.structure(), .seed = test_seed()});
  const dense<double> p = to_dense(P).template cast<double>();
  EXPECT_LT(relative_error(to_dense(Q).template cast<double>(), p), h2expr::test::tol<T>(10));  // the same arithmetic: to rounding
}

REGISTER_TYPED_TEST_SUITE_P(expression_test, every_node_type_against_dense, hara_of_expressions,
                            symmetry_and_structure_are_deduced, schur_complements_of_poisson_problems,
                            bad_input_is_a_clear_error, user_operands_join_expressions,
                            tree_order_products_match_user_order);

}  // namespace h2expr::test
