#pragma once
// sparse_matrix and sparse_cholesky against dense Eigen analogues, for every (scalar, space): CSR
// construction (unsorted rows, duplicates), symmetry and transpose detection, products with op,
// alpha, beta and strided views, block solves with 2D Poisson and random SPD matrices, and bad input.
#include <h2expr/cholesky.hpp>
#include <h2expr/matrix.hpp>
#include <h2expr/sparse_matrix.hpp>

#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference.hpp"
#include "sparse_patterns.hpp"
#include "instances/primitives.hpp"
#include "support.hpp"

namespace h2expr::test {

// The 7-point Laplacian on an nx x ny x nz grid (Dirichlet), minus shift times I: its dense
// separators give the supernodal factorization (CHOLMOD) supernodes of tens of columns.
template <class T>
sparse<T> laplacian_3d(int nx, int ny, int nz, double shift = 0) {
  std::vector<Eigen::Triplet<T>> t;
  auto id = [=](int x, int y, int z) { return x + nx * (y + ny * z); };
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        t.emplace_back(id(x, y, z), id(x, y, z), T(6 - shift));
        if (x > 0) t.emplace_back(id(x, y, z), id(x - 1, y, z), T(-1)), t.emplace_back(id(x - 1, y, z), id(x, y, z), T(-1));
        if (y > 0) t.emplace_back(id(x, y, z), id(x, y - 1, z), T(-1)), t.emplace_back(id(x, y - 1, z), id(x, y, z), T(-1));
        if (z > 0) t.emplace_back(id(x, y, z), id(x, y, z - 1), T(-1)), t.emplace_back(id(x, y, z - 1), id(x, y, z), T(-1));
      }
  sparse<T> S(nx * ny * nz, nx * ny * nz);
  S.setFromTriplets(t.begin(), t.end());
  return S;
}

// (B B^T + (B B^T)^T) / 2 + I for a sparse random B: SPD, exactly symmetric, with a scattered
// pattern (so the fill-reducing ordering has work to do).
template <class T>
sparse<T> random_spd(rng& g, int n, double density) {
  const sparse<T> B = random_sparse<T>(g, n, n, density);
  const sparse<T> M = B * sparse<T>(B.transpose());
  sparse<T> I(n, n);
  I.setIdentity();
  return sparse<T>((M + sparse<T>(M.transpose())) * T(0.5) + I);
}

template <class C>
class sparse_test : public space_test<C> {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  using space_test<C>::ctx_;
  static constexpr bool single = std::is_same_v<T, float>;

  sparse_matrix<T, Space> make(const sparse<T>& S) { return sparse_matrix<T, Space>::from_eigen(S, ctx_); }
  matrix<T, Space> make(const dense<T>& M) { return matrix<T, Space>(M, ctx_); }

  // Solves of 1, 7 and 40 vectors against the residual and a dense LLT solve in double. The error
  // bound is scaled by the condition number of S (estimated from the dense matrix).
  void check_solves(const sparse<T>& Se, std::uint64_t salt) {
    rng g(salt);
    const auto S = make(Se);
    const auto F = cholesky(S);
    const index n = Se.rows();
    EXPECT_EQ(F.rows(), n);
    EXPECT_EQ(F.cols(), n);
    EXPECT_GE(F.factor_nnz(), std::size_t((Se.nonZeros() + n) / 2));  // at least the lower triangle
    EXPECT_GT(F.memory_bytes(), 0u);
    EXPECT_GE(F.factor_seconds(), 0.0);
    const dense<double> Sd = dense<T>(Se).template cast<double>();
    const Eigen::VectorXd eigenvalues = reference::symmetric_eigenvalues(Sd);
    const double cond = eigenvalues.maxCoeff() / eigenvalues.minCoeff();
    const double bound = tol<T>(10) * cond;
    for (int nv : {1, 7, 40}) {
      const dense<T> B = g.normal<T>(n, nv);
      auto Bm = make(B);
      auto Xm = make(dense<T>::Constant(n, nv, std::numeric_limits<T>::quiet_NaN()));
      F.solve(Bm.view(), Xm.view());
      const dense<double> X = to_dense(Xm).template cast<double>();
      EXPECT_LT((Sd * X - B.template cast<double>()).norm() / B.template cast<double>().norm(), tol<T>(10) * 4)
          << nv << " vectors";
      dense<double> ref;
      ASSERT_TRUE(reference::cholesky_solve(Sd, B.template cast<double>(), ref)) << "the test matrix is not SPD";
      EXPECT_LT(relative_error(X, ref), bound) << nv << " vectors";
      // In place: in and out the same block.
      F.solve(Bm.view(), Bm.view());
      EXPECT_LT(relative_error(to_dense(Bm).template cast<double>(), X), tol<T>(1)) << nv << " vectors, in place";
    }
  }
};
TYPED_TEST_SUITE_P(sparse_test);

// from_eigen / from_csr / to_eigen round trips; unsorted rows and duplicates; nnz and memory.
TYPED_TEST_P(sparse_test, construction_round_trip) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng g(1);
  const sparse<T> Se = random_sparse<T>(g, 23, 17, 0.2);
  const auto S = this->make(Se);
  EXPECT_EQ(S.rows(), 23);
  EXPECT_EQ(S.cols(), 17);
  EXPECT_EQ(S.nnz(), Se.nonZeros());
  EXPECT_EQ(S.memory_bytes(), std::size_t(2 * Se.nonZeros() * (sizeof(int) + sizeof(T)) + (24 + 18) * sizeof(int)));
  EXPECT_TRUE(dense<T>(S.to_eigen()) == dense<T>(Se));
  EXPECT_TRUE(S.context_ptr() == this->ctx_);
  // The explicit constructor, from a row-major matrix.
  const Eigen::SparseMatrix<T, Eigen::RowMajor> Re = Se;
  EXPECT_TRUE(dense<T>(sparse_matrix<T, Space>(Re, this->ctx_).to_eigen()) == dense<T>(Se));

  // The same matrix from CSR arrays with shuffled rows and some entries split into two.
  std::vector<int> row_ptr{0}, col_idx;
  std::vector<T> values;
  std::vector<Eigen::Triplet<T>> expected;
  std::normal_distribution<double> nd;
  const Eigen::SparseMatrix<T, Eigen::RowMajor> R = Se;
  for (int r = 0; r < R.rows(); ++r) {
    std::vector<std::pair<int, T>> row;
    for (typename Eigen::SparseMatrix<T, Eigen::RowMajor>::InnerIterator it(R, r); it; ++it) {
      if (g.uniform_int(0, 2) == 0) {
        const T a = T(nd(g.engine)), b = T(nd(g.engine));
        row.emplace_back(int(it.col()), a);
        row.emplace_back(int(it.col()), b);
        expected.emplace_back(r, int(it.col()), a + b);
      } else {
        row.emplace_back(int(it.col()), it.value());
        expected.emplace_back(r, int(it.col()), it.value());
      }
    }
    std::shuffle(row.begin(), row.end(), g.engine);
    for (auto [c, v] : row) col_idx.push_back(c), values.push_back(v);
    row_ptr.push_back(int(col_idx.size()));
  }
  sparse<T> E(23, 17);
  E.setFromTriplets(expected.begin(), expected.end());
  const auto C = sparse_matrix<T, Space>::from_csr(23, 17, row_ptr, col_idx, values, this->ctx_);
  EXPECT_EQ(C.nnz(), E.nonZeros());
  EXPECT_TRUE(dense<T>(C.to_eigen()) == dense<T>(E));

  // Explicit zeros stay entries; empty matrices work.
  const auto Z = sparse_matrix<T, Space>::from_csr(2, 3, {0, 1, 1}, {2}, {T(0)}, this->ctx_);
  EXPECT_EQ(Z.nnz(), 1);
  EXPECT_EQ(Z.to_eigen().nonZeros(), 1);
  const auto empty = sparse_matrix<T, Space>::from_csr(0, 0, {0}, {}, {}, this->ctx_);
  EXPECT_EQ(empty.rows(), 0);
  EXPECT_EQ(empty.nnz(), 0);
  EXPECT_TRUE(empty.symmetric());
  EXPECT_EQ(empty.to_eigen().rows(), 0);
}

// symmetric() and is_transpose_of() are exact.
TYPED_TEST_P(sparse_test, symmetry_and_transposes) {
  using T = typename TypeParam::scalar;
  rng g(2);
  const sparse<T> P = laplacian_2d<T>(7, 5);
  EXPECT_TRUE(this->make(P).symmetric());
  EXPECT_TRUE(this->make(random_spd<T>(g, 40, 0.05)).symmetric());
  sparse<T> Q = P;
  Q.coeffRef(3, 4) = T(-1.5);  // one value off
  EXPECT_FALSE(this->make(Q).symmetric());
  sparse<T> Z = P;
  Z.coeffRef(0, 9) = T(0);  // an explicit zero makes the pattern non-symmetric
  EXPECT_FALSE(this->make(Z).symmetric());
  const sparse<T> A = random_sparse<T>(g, 19, 19, 0.2);
  EXPECT_FALSE(this->make(A).symmetric());
  EXPECT_FALSE(this->make(random_sparse<T>(g, 6, 9, 0.3)).symmetric());

  const sparse<T> Re = random_sparse<T>(g, 21, 13, 0.25);
  const auto R = this->make(Re);
  const auto Rt = this->make(sparse<T>(Re.transpose()));
  EXPECT_TRUE(Rt.is_transpose_of(R));
  EXPECT_TRUE(R.is_transpose_of(Rt));
  EXPECT_FALSE(R.is_transpose_of(R));
  sparse<T> Wrong = Re.transpose();
  Wrong.valuePtr()[Wrong.nonZeros() / 2] *= T(2);
  EXPECT_FALSE(this->make(Wrong).is_transpose_of(R));
  const auto S = this->make(P);
  EXPECT_TRUE(S.is_transpose_of(S));
  EXPECT_TRUE(S.is_transpose_of(this->make(P)));
  EXPECT_FALSE(this->make(A).is_transpose_of(this->make(A)));
  EXPECT_TRUE(this->make(sparse<T>(A.transpose())).is_transpose_of(this->make(A)));
}

// out = alpha op(S) in + beta out against dense products, on blocks with ld > rows; the rest of the
// output matrix is not touched, and beta = 0 overwrites NaN.
TYPED_TEST_P(sparse_test, multiply_matches_dense) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng g(3);
  const sparse<T> Se = random_sparse<T>(g, 37, 29, 0.15);
  const auto S = this->make(Se);
  const dense<T> Sd = Se;
  struct coefficients {
    T alpha, beta;
  };
  for (auto trans : {detail::op::none, detail::op::transpose})
    for (int nv : {1, 3, 13})
      for (coefficients ab : {coefficients{T(1.5), T(0)}, coefficients{T(-0.5), T(2)}, coefficients{T(1), T(1)}}) {
        const dense<T> opS = trans == detail::op::none ? dense<T>(Sd) : dense<T>(Sd.transpose());
        const index m = opS.rows(), k = opS.cols();
        const dense<T> X = g.normal<T>(k, nv);
        const dense<T> Y0 = ab.beta == T(0) ? dense<T>::Constant(m, nv, std::numeric_limits<T>::quiet_NaN())
                                            : g.normal<T>(m, nv);
        const dense<T> around = g.normal<T>(m + 4, nv + 1);
        auto Xm = this->make(dense<T>(g.normal<T>(k + 3, nv + 2)));
        auto Ym = this->make(around);
        upload<T, Space>(Xm.block(1, 1, k, nv), X);
        upload<T, Space>(Ym.block(2, 1, m, nv), Y0);
        S.multiply(trans, ab.alpha, Xm.block(1, 1, k, nv), ab.beta, Ym.block(2, 1, m, nv));
        dense<double> expected = double(ab.alpha) * opS.template cast<double>() * X.template cast<double>();
        if (ab.beta != T(0)) expected += double(ab.beta) * Y0.template cast<double>();
        const dense<T> Y = to_dense(Ym);
        const std::string what = std::string(trans == detail::op::none ? "S" : "S^T") + ", " + std::to_string(nv) +
                                 " vectors, alpha " + std::to_string(ab.alpha) + ", beta " + std::to_string(ab.beta);
        EXPECT_LT(relative_error(dense<T>(Y.block(2, 1, m, nv)), expected), tol<T>(10)) << what;
        dense<T> outside = Y;
        outside.block(2, 1, m, nv) = around.block(2, 1, m, nv);
        EXPECT_TRUE(outside == around) << what << ": entries outside the block changed";
      }
  // A matrix without entries: out = beta out.
  const auto E = sparse_matrix<T, Space>::from_csr(5, 4, std::vector<int>(6, 0), {}, {}, this->ctx_);
  const dense<T> Y0 = g.normal<T>(5, 2);
  auto Ym = this->make(Y0);
  E.multiply(detail::op::none, T(1), this->make(dense<T>(g.normal<T>(4, 2))).view(), T(3), Ym.view());
  EXPECT_LT(relative_error(to_dense(Ym), dense<T>(T(3) * Y0)), tol<T>());
  auto Z = this->make(dense<T>::Constant(4, 2, std::numeric_limits<T>::quiet_NaN()));
  E.multiply(detail::op::transpose, T(1), this->make(dense<T>(g.normal<T>(5, 2))).view(), T(0), Z.view());
  EXPECT_TRUE(to_dense(Z).isZero(0));
  // No vectors: nothing to do.
  S.multiply(detail::op::none, T(1), matrix<T, Space>(29, 0, this->ctx_).view(), T(0),
             matrix<T, Space>(37, 0, this->ctx_).view());
}

TYPED_TEST_P(sparse_test, cholesky_solves_poisson) {
  using T = typename TypeParam::scalar;
  this->check_solves(laplacian_2d<T>(12, 9), 4);
}

// 3D: the factorization's dense blocks (CHOLMOD's supernodes) are real here; an indefinite shift is
// found in them.
TYPED_TEST_P(sparse_test, cholesky_solves_poisson_3d) {
  using T = typename TypeParam::scalar;
  this->check_solves(laplacian_3d<T>(9, 8, 7), 8);
  // Eigenvalues 6 - 2 (cos a + cos b + cos c) - 3 span (-3, 9): indefinite, with a positive diagonal.
  EXPECT_THROW(cholesky(this->make(laplacian_3d<T>(9, 8, 7, 3.0))), not_positive_definite);
}

TYPED_TEST_P(sparse_test, cholesky_solves_random_spd) {
  using T = typename TypeParam::scalar;
  rng g(5);
  this->check_solves(random_spd<T>(g, 150, 0.02), 6);
}

TYPED_TEST_P(sparse_test, cholesky_of_tiny_matrices) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const auto F0 = cholesky(sparse_matrix<T, Space>::from_csr(0, 0, {0}, {}, {}, this->ctx_));
  EXPECT_EQ(F0.rows(), 0);
  EXPECT_EQ(F0.factor_nnz(), 0u);
  F0.solve(matrix<T, Space>(0, 3, this->ctx_).view(), matrix<T, Space>(0, 3, this->ctx_).view());
  const auto F1 = cholesky(sparse_matrix<T, Space>::from_csr(1, 1, {0, 1}, {0}, {T(4)}, this->ctx_));
  EXPECT_EQ(F1.rows(), 1);
  EXPECT_EQ(F1.factor_nnz(), 1u);
  dense<T> b(1, 2);
  b << T(8), T(-2);
  auto X = this->make(dense<T>::Zero(1, 2));
  F1.solve(this->make(b).view(), X.view());
  EXPECT_EQ(to_dense(X)(0, 0), T(2));
  EXPECT_EQ(to_dense(X)(0, 1), T(-0.5));
  EXPECT_THROW(cholesky(sparse_matrix<T, Space>::from_csr(1, 1, {0, 1}, {0}, {T(-4)}, this->ctx_)),
               not_positive_definite);
  EXPECT_THROW(cholesky(sparse_matrix<T, Space>::from_csr(1, 1, {0, 0}, {}, {}, this->ctx_)), not_positive_definite);
}

TYPED_TEST_P(sparse_test, bad_csr_is_rejected) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto csr = [&](index rows, index cols, std::vector<int> p, std::vector<int> c, std::vector<T> v) {
    return sparse_matrix<T, Space>::from_csr(rows, cols, p, c, v, this->ctx_);
  };
  // A valid 2 x 3 matrix for reference, then one defect at a time.
  EXPECT_NO_THROW(csr(2, 3, {0, 1, 3}, {2, 0, 1}, {T(1), T(2), T(3)}));
  EXPECT_THROW(csr(-1, 3, {0}, {}, {}), invalid_argument);
  EXPECT_THROW(csr(2, 3, {0, 1}, {2}, {T(1)}), dimension_mismatch);                          // row_ptr too short
  EXPECT_THROW(csr(2, 3, {0, 1, 3}, {2, 0, 1}, {T(1), T(2)}), dimension_mismatch);           // values too short
  EXPECT_THROW(csr(2, 3, {1, 1, 3}, {2, 0, 1}, {T(1), T(2), T(3)}), invalid_argument);        // starts at 1
  EXPECT_THROW(csr(2, 3, {0, 2, 1}, {2, 0, 1}, {T(1), T(2), T(3)}), invalid_argument);        // decreases
  EXPECT_THROW(csr(2, 3, {0, 1, 2}, {2, 0, 1}, {T(1), T(2), T(3)}), dimension_mismatch);      // ends before nnz
  EXPECT_THROW(csr(2, 3, {0, 1, 3}, {2, 0, 3}, {T(1), T(2), T(3)}), invalid_argument);        // column 3 of 3
  EXPECT_THROW(csr(2, 3, {0, 1, 3}, {2, -1, 1}, {T(1), T(2), T(3)}), invalid_argument);       // negative column
  EXPECT_THROW(csr(2, 3, {0, 1, 3}, {2, 0, 1}, {T(1), std::numeric_limits<T>::quiet_NaN(), T(3)}), non_finite_value);
  EXPECT_THROW(csr(2, 3, {0, 1, 3}, {2, 0, 1}, {T(1), T(2), std::numeric_limits<T>::infinity()}), non_finite_value);
  try {
    csr(2, 3, {0, 1, 3}, {2, 0, 7}, {T(1), T(2), T(3)});
    FAIL() << "no exception";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("column index 7 in row 1"), std::string::npos) << e.what();
  }
  try {
    csr(2, 3, {0, 1}, {2}, {T(1)});
    FAIL() << "no exception";
  } catch (const dimension_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("row_ptr has 2 entries"), std::string::npos) << e.what();
  }
  // Products with the wrong shapes.
  const auto S = csr(2, 3, {0, 1, 3}, {2, 0, 1}, {T(1), T(2), T(3)});
  matrix<T, Space> X(3, 2, this->ctx_), Y(2, 2, this->ctx_), W(3, 3, this->ctx_);
  EXPECT_NO_THROW(S.multiply(detail::op::none, T(1), X.view(), T(0), Y.view()));
  EXPECT_THROW(S.multiply(detail::op::transpose, T(1), X.view(), T(0), Y.view()), dimension_mismatch);
  EXPECT_THROW(S.multiply(detail::op::none, T(1), X.view(), T(0), W.view()), dimension_mismatch);
  EXPECT_THROW(S.multiply(detail::op::none, T(1), W.view(), T(0), Y.view()), dimension_mismatch);
}

TYPED_TEST_P(sparse_test, cholesky_rejects_what_it_cannot_factor) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng g(7);
  EXPECT_THROW(cholesky(this->make(random_sparse<T>(g, 6, 5, 0.5))), dimension_mismatch);
  sparse<T> N = laplacian_2d<T>(6, 5);
  N.coeffRef(2, 1) = T(-0.5);
  EXPECT_THROW(cholesky(this->make(N)), invalid_argument);
  EXPECT_THROW(cholesky(this->make(random_sparse<T>(g, 9, 9, 0.4))), invalid_argument);
  // Indefinite: eigenvalues 2 - 2 cos a - 2 cos b span (-2, 6), while the diagonal (2) is positive.
  try {
    cholesky(this->make(laplacian_2d<T>(12, 9, false, 2.0)));
    FAIL() << "no exception";
  } catch (const not_positive_definite& e) {
    EXPECT_NE(std::string(e.what()).find("108 x 108 matrix is not symmetric positive definite"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cholesky(this->make(sparse<T>(-laplacian_2d<T>(5, 4)))), not_positive_definite);
  // Singular, positive semidefinite: the pure Neumann Laplacian (constants are its null space).
  for (auto [nx, ny] : {std::pair{12, 9}, std::pair{30, 20}, std::pair{3, 1}})
    EXPECT_THROW(cholesky(this->make(laplacian_2d<T>(nx, ny, true))), not_positive_definite) << nx << " x " << ny;
  // ... and the same Laplacian made definite by one Dirichlet node factors.
  sparse<T> D = laplacian_2d<T>(12, 9, true);
  D.coeffRef(0, 0) += T(1);
  EXPECT_NO_THROW(cholesky(this->make(D)));
  // not_positive_definite is a numerical_failure.
  EXPECT_THROW(cholesky(this->make(laplacian_2d<T>(4, 4, true))), numerical_failure);

  // Solves with the wrong shapes.
  const auto F = cholesky(this->make(laplacian_2d<T>(4, 3)));
  matrix<T, Space> B(12, 2, this->ctx_), X(12, 2, this->ctx_), Wrong(11, 2, this->ctx_), Wide(12, 3, this->ctx_);
  EXPECT_NO_THROW(F.solve(B.view(), X.view()));
  EXPECT_THROW(F.solve(Wrong.view(), X.view()), dimension_mismatch);
  EXPECT_THROW(F.solve(B.view(), Wrong.view()), dimension_mismatch);
  EXPECT_THROW(F.solve(B.view(), Wide.view()), dimension_mismatch);
}

// Copies share the factor (and its workspace), which serves any number of vectors in any order.
TYPED_TEST_P(sparse_test, cholesky_copies_and_varying_blocks) {
  using T = typename TypeParam::scalar;
  rng g(8);
  const sparse<T> Se = laplacian_2d<T>(20, 17);
  const auto F = cholesky(this->make(Se));
  const auto G = F;  // a copy: the same factor
  EXPECT_EQ(G.memory_bytes(), F.memory_bytes());
  EXPECT_TRUE(G.context_ptr() == F.context_ptr());
  const dense<double> Sd = dense<T>(Se).template cast<double>();
  for (int nv : {33, 2, 16, 17, 1, 64}) {
    const dense<T> B = g.normal<T>(Se.rows(), nv);
    auto X = this->make(dense<T>::Zero(Se.rows(), nv));
    (nv % 2 ? F : G).solve(this->make(B).view(), X.view());
    const dense<double> Xd = to_dense(X).template cast<double>();
    EXPECT_LT((Sd * Xd - B.template cast<double>()).norm() / B.template cast<double>().norm(), tol<T>(40))
        << nv << " vectors";
  }
}

REGISTER_TYPED_TEST_SUITE_P(sparse_test, construction_round_trip, symmetry_and_transposes, multiply_matches_dense,
                            cholesky_solves_poisson, cholesky_solves_poisson_3d, cholesky_solves_random_spd, cholesky_of_tiny_matrices,
                            bad_csr_is_rejected, cholesky_rejects_what_it_cannot_factor,
                            cholesky_copies_and_varying_blocks);

}  // namespace h2expr::test
