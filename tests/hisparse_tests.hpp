#pragma once
// hisparse_matrix against Eigen's sparse products, for every (scalar, space): products and transposed
// products on many patterns and node sizes (every node form exercised), transposition and scale as
// state, sums, memory_bytes against a count of the stored nodes, a Schur complement through hara(),
// determinism over thread counts (host), and bad input.
#include <h2expr/cholesky.hpp>
#include <h2expr/hara.hpp>
#include <h2expr/hisparse_matrix.hpp>
#include <h2expr/matrix.hpp>
#include <h2expr/sparse_matrix.hpp>

#include <Eigen/SparseCore>
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "../examples/poisson.hpp"
#include "instances/primitives.hpp"
#include "reference.hpp"
#include "sparse_patterns.hpp"
#include "support.hpp"

namespace h2expr::test {

// Test patterns (standard normal values).
template <class T>
sparse<T> from_entries(int rows, int cols, const std::vector<std::pair<int, int>>& at, rng& g) {
  std::normal_distribution<double> nd;
  std::vector<Eigen::Triplet<T>> t;
  for (auto [i, j] : at) t.emplace_back(i, j, T(nd(g.engine)));
  sparse<T> S(rows, cols);
  S.setFromTriplets(t.begin(), t.end());
  return S;
}
// Row lengths from a power law (a few rows hold most entries), columns uniform.
template <class T>
sparse<T> power_law_rows(rng& g, int rows, int cols, int max_row) {
  std::vector<std::pair<int, int>> at;
  for (int i = 0; i < rows; ++i) {
    const int len = std::min(cols, int(max_row / std::pow(double(i + 1), 1.2)) + 1);
    for (int e = 0; e < len; ++e) at.emplace_back(i, g.uniform_int(0, cols - 1));
  }
  return from_entries<T>(rows, cols, at, g);
}
template <class T>
sparse<T> banded(rng& g, int n, int lower, int upper) {
  std::vector<std::pair<int, int>> at;
  for (int i = 0; i < n; ++i)
    for (int j = std::max(0, i - lower); j <= std::min(n - 1, i + upper); ++j) at.emplace_back(i, j);
  return from_entries<T>(n, n, at, g);
}
// Dense b x b blocks on a block-sparse pattern (FEM-like couplings).
template <class T>
sparse<T> block_dense(rng& g, int blocks, int b, double density) {
  std::vector<std::pair<int, int>> at;
  std::uniform_real_distribution<double> u(0, 1);
  for (int I = 0; I < blocks; ++I)
    for (int J = 0; J < blocks; ++J)
      if (I == J || u(g.engine) < density)
        for (int i = 0; i < b; ++i)
          for (int j = 0; j < b; ++j) at.emplace_back(I * b + i, J * b + j);
  return from_entries<T>(blocks * b, blocks * b, at, g);
}
// Empty rows and columns: entries only in every third row and every fourth column.
template <class T>
sparse<T> holes(rng& g, int rows, int cols) {
  std::vector<std::pair<int, int>> at;
  for (int i = 0; i < rows; i += 3)
    for (int j = 0; j < cols; j += 4)
      if (g.uniform_int(0, 2) == 0) at.emplace_back(i, j);
  return from_entries<T>(rows, cols, at, g);
}
// A few entries scattered over a wide range (the tree's upper levels hold them as COO with 2- or
// 4-byte coordinates).
template <class T>
sparse<T> scattered(rng& g, int rows, int cols, int count) {
  std::vector<std::pair<int, int>> at;
  for (int e = 0; e < count; ++e) at.emplace_back(g.uniform_int(0, rows - 1), g.uniform_int(0, cols - 1));
  return from_entries<T>(rows, cols, at, g);
}

template <class C>
class hisparse_test : public space_test<C> {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  using space_test<C>::ctx_;
  static constexpr bool single = std::is_same_v<T, float>;

  hisparse_matrix<T, Space> make(const sparse<T>& S, int d = 256) {
    return hisparse_matrix<T, Space>::from_eigen(S, ctx_, {.node_size = d});
  }
  matrix<T, Space> make(const dense<T>& M) { return matrix<T, Space>(M, ctx_); }

  // Y = alpha op(H) X + beta Y against the dense product, on blocks inside larger matrices (ld > rows;
  // the rest untouched), beta = 0 overwriting NaN. `expected_op` is op(H) as a dense matrix.
  void check_product(const hisparse_matrix<T, Space>& H, op t, const dense<T>& expected_op, const std::string& what) {
    rng g(11);
    const index m = expected_op.rows(), k = expected_op.cols();
    for (int nv : {1, 3, 13})
      for (auto [alpha, beta] : {std::pair<T, T>{T(1), T(0)}, std::pair<T, T>{T(-0.5), T(2)}}) {
        const dense<T> X = g.normal<T>(k, nv);
        const dense<T> Y0 =
            beta == T(0) ? dense<T>::Constant(m, nv, std::numeric_limits<T>::quiet_NaN()) : g.normal<T>(m, nv);
        const dense<T> around = g.normal<T>(m + 3, nv + 1);
        auto Xm = make(dense<T>(g.normal<T>(k + 2, nv + 1)));
        auto Ym = make(around);
        upload<T, Space>(Xm.block(1, 1, k, nv), X);
        upload<T, Space>(Ym.block(2, 0, m, nv), Y0);
        H.apply(t, alpha, Xm.block(1, 1, k, nv), beta, Ym.block(2, 0, m, nv));
        dense<double> expected = double(alpha) * expected_op.template cast<double>() * X.template cast<double>();
        if (beta != T(0)) expected += double(beta) * Y0.template cast<double>();
        const dense<T> Y = to_dense(Ym);
        const std::string w = what + (t == op::none ? ", H" : ", H^T") + ", " + std::to_string(nv) + " vectors, beta " +
                              std::to_string(beta);
        if (m > 0 && nv > 0) {
          const double scale = std::max(1.0, expected.norm());
          EXPECT_LT((dense<T>(Y.block(2, 0, m, nv)).template cast<double>() - expected).norm() / scale, tol<T>(20)) << w;
        }
        dense<T> outside = Y;
        outside.block(2, 0, m, nv) = around.block(2, 0, m, nv);
        EXPECT_TRUE(outside == around) << w << ": wrote outside its block";
      }
  }
  void check_both(const sparse<T>& S, int d, const std::string& what) {
    const auto H = make(S, d);
    const dense<T> D = S;
    const std::string w = what + ", d " + std::to_string(d);
    check_product(H, op::none, D, w);
    check_product(H, op::transpose, dense<T>(D.transpose()), w);
    EXPECT_TRUE(dense<T>(H.to_eigen()) == D) << w;
  }
};
TYPED_TEST_SUITE_P(hisparse_test);

// Products and transposed products from the one stored tree, against Eigen, on every pattern of the
// issue and node sizes from 2 to 256.
TYPED_TEST_P(hisparse_test, products_match_eigen) {
  using T = typename TypeParam::scalar;
  rng g(1);
  const std::vector<std::pair<std::string, sparse<T>>> patterns = {
      {"uniform 57 x 43", random_sparse<T>(g, 57, 43, 0.1)},
      {"uniform 300 x 520", random_sparse<T>(g, 300, 520, 0.02)},
      {"power-law rows 400 x 300", power_law_rows<T>(g, 400, 300, 250)},
      {"banded 500", banded<T>(g, 500, 3, 7)},
      {"block-dense 12 x 12 blocks of 9", block_dense<T>(g, 12, 9, 0.2)},
      {"empty rows and columns 90 x 70", holes<T>(g, 90, 70)},
      {"1 x 700", random_sparse<T>(g, 1, 700, 0.1)},
      {"700 x 1", random_sparse<T>(g, 700, 1, 0.1)},
      {"no entries 20 x 30", sparse<T>(20, 30)},
      {"0 x 0", sparse<T>(0, 0)},
      {"scattered 1500 x 1000", scattered<T>(g, 1500, 1000, 60)},
  };
  for (const auto& [name, S] : patterns)
    for (int d : {2, 4, 16, 256}) this->check_both(S, d, name);
}

// Each node form appears where its pattern calls for it, and products through it are right.
TYPED_TEST_P(hisparse_test, every_node_form_is_used) {
  using T = typename TypeParam::scalar;
  rng g(2);
  hisparse_nodes seen;
  auto add = [&](const sparse<T>& S, int d, const std::string& what) {
    const auto H = this->make(S, d);
    const auto n = H.nodes();
    seen.coo1 += n.coo1, seen.coo2 += n.coo2, seen.coo4 += n.coo4, seen.dense_leaf += n.dense_leaf;
    seen.sparse_inner += n.sparse_inner, seen.dense_inner += n.dense_inner;
    this->check_both(S, d, what);
    return n;
  };
  EXPECT_GT(add(block_dense<T>(g, 8, 8, 0.3), 4, "block-dense, d 4").dense_leaf, 0u);
  EXPECT_GT(add(random_sparse<T>(g, 64, 64, 1.0), 2, "dense 64 x 64, d 2").dense_inner, 0u);
  EXPECT_GT(add(scattered<T>(g, 2000, 1500, 40), 16, "scattered 2000 x 1500, d 16").coo2, 0u);
  // Two entries 99,000 apart: one COO node with 4-byte coordinates costs no more than a tree of two.
  EXPECT_GT(add(from_entries<T>(1, 100000, {{0, 5}, {0, 99005}}, g), 256, "1 x 100000").coo4, 0u);
  EXPECT_GT(add(from_entries<T>(100000, 1, {{5, 0}, {99005, 0}}, g), 256, "100000 x 1").coo4, 0u);
  EXPECT_GT(add(banded<T>(g, 600, 2, 2), 256, "banded 600").sparse_inner, 0u);
  EXPECT_GT(seen.coo1, 0u);
}

// memory_bytes() is what the nodes take, counted by hand for a small tree: d = 4, an 8 x 8 matrix
// (levels 2: a 16 x 16 root) with a full 4 x 4 block at (0, 0) and one entry at (7, 7). The full leaf
// is dense (16 values); the single entry a COO leaf (a count, one coordinate pair, padding to the
// value's alignment, one value, padded to 16 bytes); the root a sparse inner node with 2 children
// (a count, 2 positions, 2 references: 16 bytes). The CUDA space adds its queues: one chunk each.
TYPED_TEST_P(hisparse_test, memory_is_what_is_stored) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng g(3);
  std::vector<std::pair<int, int>> at{{7, 7}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) at.emplace_back(i, j);
  const auto H = this->make(from_entries<T>(8, 8, at, g), 4);
  const auto n = H.nodes();
  EXPECT_EQ(n.dense_leaf, 1u);
  EXPECT_EQ(n.coo1, 1u);
  EXPECT_EQ(n.sparse_inner, 1u);
  EXPECT_EQ(n.coo2 + n.coo4 + n.dense_inner, 0u);
  EXPECT_EQ(H.levels(), 2);
  EXPECT_EQ(H.nnz(), 17);
  const std::size_t coo_leaf = ((4 + 2 + sizeof(T) - 1) / sizeof(T) * sizeof(T) + sizeof(T) + 15) / 16 * 16;
  const std::size_t queues = std::is_same_v<Space, host> ? 0 : 2 * sizeof(detail::hisparse::chunk);
  EXPECT_EQ(H.memory_bytes(), 16 * sizeof(T) + coo_leaf + 16 + queues);

  // Poisson 2D at the default node size: fewer bytes than one CSR copy (sparse_matrix holds two).
  const sparse<T> P = laplacian_2d<T>(60, 50);
  const auto HP = this->make(P);
  const std::size_t csr = std::size_t(P.nonZeros()) * (sizeof(int) + sizeof(T)) + std::size_t(P.rows() + 1) * sizeof(int);
  EXPECT_LT(HP.memory_bytes(), csr);
  EXPECT_EQ((sparse_matrix<T, Space>::from_eigen(P, this->ctx_).memory_bytes()), 2 * csr);
}

// transposed() and scaled() are state over shared nodes; transpose(H) in expressions uses the same
// storage; symmetric() is exact.
TYPED_TEST_P(hisparse_test, transpose_and_scale_are_state) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng g(4);
  const sparse<T> S = random_sparse<T>(g, 70, 45, 0.1);
  const dense<T> D = S;
  const auto H = this->make(S, 16);
  const auto Ht = H.transposed();
  EXPECT_EQ(Ht.rows(), 45);
  EXPECT_EQ(Ht.cols(), 70);
  EXPECT_TRUE(Ht.is_transposed());
  EXPECT_EQ(Ht.memory_bytes(), H.memory_bytes());
  this->check_product(Ht, op::none, dense<T>(D.transpose()), "H.transposed()");
  this->check_product(Ht, op::transpose, D, "H.transposed()");
  const auto H3 = H.scaled(T(-3)).transposed().scaled(T(0.5));
  EXPECT_EQ(H3.scale(), T(-1.5));
  this->check_product(H3, op::none, dense<T>(T(-1.5) * D.transpose()), "scaled and transposed");
  EXPECT_TRUE(dense<T>(H3.to_eigen()) == dense<T>(T(-1.5) * D.transpose()));
  // In expressions.
  const dense<T> X = g.normal<T>(70, 4);
  const matrix<T, Space> Y = transpose(H) * this->make(X);
  EXPECT_LT(relative_error(to_dense(Y), dense<T>(D.transpose() * X)), tol<T>(10));
  const matrix<T, Space> Z = (2.0 * Ht + transpose(H)) * this->make(X);
  EXPECT_LT(relative_error(to_dense(Z), dense<T>(3 * D.transpose() * X)), tol<T>(10));
  // Symmetry.
  EXPECT_TRUE(this->make(laplacian_2d<T>(9, 7)).symmetric());
  EXPECT_FALSE(H.symmetric());
  sparse<T> P = laplacian_2d<T>(9, 7);
  P.coeffRef(2, 3) = T(-2);
  EXPECT_FALSE(this->make(P).symmetric());
}

// Sums of HiSparse terms convert to a new matrix, against Eigen.
TYPED_TEST_P(hisparse_test, sums_convert_to_a_new_matrix) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng g(5);
  const sparse<T> A = random_sparse<T>(g, 90, 90, 0.05), B = banded<T>(g, 90, 2, 5);
  const auto HA = this->make(A, 16), HB = this->make(B, 4);
  const hisparse_matrix<T, Space> C = HA + HB;
  EXPECT_EQ(C.node_size(), 16);
  EXPECT_LT(relative_error(dense<T>(C.to_eigen()), dense<T>(dense<T>(A) + dense<T>(B))), tol<T>(1));
  const hisparse_matrix<T, Space> E = HA - 2 * transpose(HB) + HB.transposed().scaled(T(0.5));
  EXPECT_LT(relative_error(dense<T>(E.to_eigen()), dense<T>(dense<T>(A) - T(1.5) * dense<T>(B).transpose())),
            tol<T>(1));
  this->check_product(E, op::none, dense<T>(dense<T>(A) - T(1.5) * dense<T>(B).transpose()), "a sum");
  // A sum whose entries cancel keeps them (explicit zeros), like sparse_matrix's duplicates.
  const hisparse_matrix<T, Space> Z = HA - HA;
  EXPECT_EQ(Z.nnz(), HA.nnz());
  EXPECT_EQ(dense<T>(Z.to_eigen()).norm(), 0);
  // Rectangular: H + G with H, G 30 x 50.
  const sparse<T> R = random_sparse<T>(g, 30, 50, 0.1), Q = random_sparse<T>(g, 30, 50, 0.1);
  const hisparse_matrix<T, Space> RQ = this->make(R) + this->make(Q);
  EXPECT_LT(relative_error(dense<T>(RQ.to_eigen()), dense<T>(dense<T>(R) + dense<T>(Q))), tol<T>(1));
  EXPECT_THROW((void)(this->make(R) + this->make(A)), dimension_mismatch);
}

// The Schur complement example with HiSparse off-diagonal blocks: hara() of
// A22 - transpose(H12) solve(F) H12 is symmetric and within the tolerance of the dense Schur complement.
TYPED_TEST_P(hisparse_test, schur_complement_with_hisparse_blocks) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto p = examples::poisson_schur_problem<T, 2>(48);
  const auto A11 = sparse_matrix<T, Space>::from_eigen(p.A11, this->ctx_);
  const auto A22 = sparse_matrix<T, Space>::from_eigen(p.A22, this->ctx_);
  const auto H12 = this->make(p.A12);
  dense<double> x;
  ASSERT_TRUE(reference::cholesky_solve(Eigen::SparseMatrix<double>(p.A11.template cast<double>()),
                                        dense<double>(p.A12.toDense().template cast<double>()), x));
  const dense<double> s = p.A22.toDense().template cast<double>() - p.A21.toDense().template cast<double>() * x;
  const auto st = ::h2expr::structure<T>::from_points(point_cloud<T, 1>(p.interface), {.leaf_size = 16});
  const double tol = this->single ? 1e-2 : 1e-5;
  auto S = hara(A22 - transpose(H12) * solve(cholesky(A11)) * H12, tol, {.structure = st, .seed = test_seed()});
  EXPECT_TRUE(S.symmetric());
  EXPECT_LT(relative_error(to_dense(S), s), 2 * tol);
}

// The host product sums every output in one order: bitwise the same on 1 and 16 threads, both
// directions. The thread count sets the band width (512 rows on 1 thread, 64 on 16 here), so COO nodes
// of side 256 at d = 16 are taken whole on one and cut into bands on the other (an earlier version's
// sums in registers then differed in the last bits).
TYPED_TEST_P(hisparse_test, host_products_do_not_depend_on_threads) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  if constexpr (!std::is_same_v<Space, host>) {
    GTEST_SKIP() << "the CUDA product adds with atomics";
  } else {
#if defined(_OPENMP)
    rng g(6);
    for (const sparse<T>& S : {power_law_rows<T>(g, 5000, 4000, 3000), scattered<T>(g, 5000, 4000, 2000)}) {
      const auto H = this->make(S, 16);
      for (op t : {op::none, op::transpose}) {
        const index m = t == op::none ? 5000 : 4000, k = t == op::none ? 4000 : 5000;
        const dense<T> X = g.normal<T>(k, 9);
        auto run = [&](int threads) {
          const int before = omp_get_max_threads();
          omp_set_num_threads(threads);
          auto Xm = this->make(X);
          auto Ym = this->make(dense<T>(dense<T>::Zero(m, 9)));
          H.apply(t, T(1), Xm.view(), T(0), Ym.view());
          omp_set_num_threads(before);
          return to_dense(Ym);
        };
        EXPECT_TRUE(run(1) == run(16)) << (t == op::none ? "H" : "H^T");
      }
    }
#else
    GTEST_SKIP() << "built without OpenMP";
#endif
  }
}

// Bad input raises h2expr::error with a message that says what.
TYPED_TEST_P(hisparse_test, bad_input_is_rejected) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  using H = hisparse_matrix<T, Space>;
  auto ctx = this->ctx_;
  EXPECT_THROW(H::from_csr(2, 2, {0, 1, 2}, {0, 2}, {T(1), T(1)}, ctx), error);            // column out of range
  EXPECT_THROW(H::from_csr(2, 2, {0, 1, 2}, {0, -1}, {T(1), T(1)}, ctx), error);           // negative column
  EXPECT_THROW(H::from_csr(2, 2, {0, 1, 2}, {0, 1}, {T(1), std::nan("")}, ctx), non_finite_value);
  EXPECT_THROW(H::from_csr(2, 2, {0, 1, 2}, {0, 1}, {T(1), T(INFINITY)}, ctx), non_finite_value);
  EXPECT_THROW(H::from_csr(2, 2, {0, 2}, {0, 1}, {T(1), T(1)}, ctx), dimension_mismatch);  // row_ptr too short
  EXPECT_THROW(H::from_csr(2, 2, {0, 2, 1}, {0, 1}, {T(1), T(1)}, ctx), error);            // decreasing
  EXPECT_THROW(H::from_csr(2, 2, {0, 1, 2}, {0, 1}, {T(1)}, ctx), dimension_mismatch);     // values too short
  EXPECT_THROW(H::from_csr(-1, 2, {0}, {}, {}, ctx), error);
  const T big = std::numeric_limits<T>::max();
  EXPECT_THROW(H::from_csr(1, 1, {0, 2}, {0, 0}, {big, big}, ctx), non_finite_value);  // duplicates overflow
  for (int d : {0, 1, 3, 100, 512})
    EXPECT_THROW(H::from_csr(1, 1, {0, 1}, {0}, {T(1)}, ctx, {.node_size = d}), invalid_argument) << d;
  const auto A = H::from_csr(2, 3, {0, 1, 2}, {0, 2}, {T(1), T(2)}, ctx);
  auto X = this->make(dense<T>(dense<T>::Ones(2, 2)));
  auto Y = this->make(dense<T>(dense<T>::Ones(2, 2)));
  EXPECT_THROW(A.apply(op::none, T(1), X.view(), T(0), Y.view()), dimension_mismatch);  // needs 3 x nv in
  auto X3 = this->make(dense<T>(dense<T>::Ones(3, 2)));
  EXPECT_THROW(A.apply(op::transpose, T(1), X3.view(), T(0), Y.view()), dimension_mismatch);
  EXPECT_NO_THROW(A.apply(op::none, T(1), X3.view(), T(0), Y.view()));
}

REGISTER_TYPED_TEST_SUITE_P(hisparse_test, products_match_eigen, every_node_form_is_used, memory_is_what_is_stored,
                            transpose_and_scale_are_state, sums_convert_to_a_new_matrix,
                            schur_complement_with_hisparse_blocks, host_products_do_not_depend_on_threads,
                            bad_input_is_rejected);

}  // namespace h2expr::test
