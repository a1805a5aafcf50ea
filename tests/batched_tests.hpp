#pragma once
// The batched primitives against Eigen, written once for every (scalar, space); instantiated per space.
// Random sizes (zero-sized items included), random entries, fresh on every run.
#include <h2expr/detail/primitives/block_batch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>
#include <tuple>
#include <vector>

#include "reference.hpp"
#include "instances/primitives.hpp"
#include "support.hpp"

namespace h2expr::test {

using detail::block_batch;
using detail::buffer;
using detail::diag;
using detail::op;
using detail::side;
using detail::uplo;

template <class T, class Space>
block_batch<T, Space> make_batch(const std::vector<dense<T>>& items) {
  std::vector<int> rows, cols;
  for (const auto& m : items) {
    rows.push_back(int(m.rows()));
    cols.push_back(int(m.cols()));
  }
  block_batch<T, Space> b(default_context<Space>(), rows, cols);
  for (int i = 0; i < b.count(); ++i) upload(b.item(i), items[i]);
  return b;
}

template <class T, class Space>
std::vector<dense<T>> read_batch(block_batch<T, Space>& b) {
  std::vector<dense<T>> out;
  for (int i = 0; i < b.count(); ++i) out.push_back(to_dense(b.item(i)));
  return out;
}

template <class T>
dense<T> nan_matrix(int rows, int cols) {
  return dense<T>::Constant(rows, cols, std::numeric_limits<T>::quiet_NaN());
}

template <class T>
dense<double> op_of(const dense<T>& a, op o) {
  dense<double> d = a.template cast<double>();
  if (o == op::transpose) d.transposeInPlace();
  return d;
}

// The context is held for the whole test: the batches share it.
template <class C>
class batched_test : public space_test<C> {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  using space_test<C>::ctx_;
  context<Space>& ctx() { return *ctx_; }
};
TYPED_TEST_SUITE_P(batched_test);

constexpr op both_ops[] = {op::none, op::transpose};

// Uniform batches of every transpose pair, beta 0 (C holds NaN, never read) and not, through the
// pointer-array and the strided gemm, against double products.
template <class T, class Space>
void check_uniform_gemm(context<Space>& ctx, rng& r, int count, int m, int n, int k, T alpha) {
  for (op ta : both_ops)
    for (op tb : both_ops)
      for (T beta : {T(0.5), T(0)}) {
        std::vector<dense<T>> a, b, c;
        for (int i = 0; i < count; ++i) {
          a.push_back(ta == op::none ? r.template normal<T>(m, k) : r.template normal<T>(k, m));
          b.push_back(tb == op::none ? r.template normal<T>(k, n) : r.template normal<T>(n, k));
          c.push_back(beta == T(0) ? nan_matrix<T>(m, n) : r.template normal<T>(m, n));
        }
        auto A = make_batch<T, Space>(a), B = make_batch<T, Space>(b), C = make_batch<T, Space>(c);
        auto C2 = make_batch<T, Space>(c);
        detail::gemm_batched(ctx, ta, tb, m, n, k, alpha, (const T* const*)A.pointers(), A.rows(0),
                             (const T* const*)B.pointers(), B.rows(0), beta, C.pointers(), m, count);
        detail::gemm_strided_batched(ctx, ta, tb, m, n, k, alpha, A.data(), A.rows(0), std::int64_t(m) * k,
                                     B.data(), B.rows(0), std::int64_t(k) * n, beta, C2.data(), m,
                                     std::int64_t(m) * n, count);
        auto got = read_batch(C), got2 = read_batch(C2);
        for (int i = 0; i < count; ++i) {
          dense<double> ref = double(alpha) * op_of(a[i], ta) * op_of(b[i], tb);
          if (beta != T(0)) ref += double(beta) * c[i].template cast<double>();
          EXPECT_LT(relative_error(got[i], ref), tol<T>(10)) << "item " << i;
          EXPECT_LT(relative_error(got2[i], ref), tol<T>(10)) << "strided item " << i;
        }
      }
}

TYPED_TEST_P(batched_test, gemm_uniform_pointer_arrays_and_strided) {
  using T = typename TypeParam::scalar;
  auto keep = default_context<typename TypeParam::space>();
  rng r(10);
  check_uniform_gemm(*keep, r, 37, 13, 9, 11, T(-1.25));
}

// Items above OpenBLAS's threading threshold (4 * 65536 multiply-adds): with several OpenMP threads
// (the threaded_* runs), the host issues them in slices of rows, columns and k (host/blas.hpp).
TYPED_TEST_P(batched_test, gemm_large_items) {
  using T = typename TypeParam::scalar;
  rng r(12);
  check_uniform_gemm(this->ctx(), r, 3, 301, 70, 290, T(0.5));
}

TYPED_TEST_P(batched_test, gemm_nonuniform_sizes) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto& c_ = this->ctx();
  rng r(11);
  const int count = 61;
  for (op ta : both_ops)
    for (op tb : both_ops)
      for (T beta : {T(-1.5), T(0)}) {
        std::vector<dense<T>> a, b, c;
        std::vector<int> ms, ns, ks;
        for (int i = 0; i < count; ++i) {
          // Mostly 1..70 (tile edges on both sides of 32 and 64), a few empty items.
          const int m = r.uniform_int(0, 10) == 0 ? 0 : r.uniform_int(1, 70);
          const int n = r.uniform_int(0, 10) == 0 ? 0 : r.uniform_int(1, 70);
          const int k = r.uniform_int(0, 10) == 0 ? 0 : r.uniform_int(1, 70);
          ms.push_back(m), ns.push_back(n), ks.push_back(k);
          a.push_back(ta == op::none ? r.template normal<T>(m, k) : r.template normal<T>(k, m));
          b.push_back(tb == op::none ? r.template normal<T>(k, n) : r.template normal<T>(n, k));
          c.push_back(beta == T(0) ? nan_matrix<T>(m, n) : r.template normal<T>(m, n));
        }
        auto A = make_batch<T, Space>(a), B = make_batch<T, Space>(b), C = make_batch<T, Space>(c);
        buffer<int, Space> M(default_context<Space>(), ms), N(default_context<Space>(), ns),
            K(default_context<Space>(), ks);
        const T alpha = T(0.75);
        detail::gemm_vbatched(c_, ta, tb, M.data(), N.data(), K.data(), alpha, (const T* const*)A.pointers(), A.ld(),
                              (const T* const*)B.pointers(), B.ld(), beta, C.pointers(), C.ld(), count,
                              *std::max_element(ms.begin(), ms.end()), *std::max_element(ns.begin(), ns.end()),
                              *std::max_element(ks.begin(), ks.end()));
        auto got = read_batch(C);
        for (int i = 0; i < count; ++i) {
          dense<double> ref = double(alpha) * op_of(a[i], ta) * op_of(b[i], tb);
          if (beta != T(0)) ref += double(beta) * c[i].template cast<double>();
          if (ks[i] == 0 && beta == T(0)) ref.setZero();
          ASSERT_FALSE(got[i].hasNaN()) << "item " << i << " read C although beta == 0";
          EXPECT_LT(relative_error(got[i], ref), tol<T>(10))
              << "item " << i << " " << ms[i] << "x" << ns[i] << "x" << ks[i];
        }
      }
}

// Sizes of a QR/SVD test batch: tall, wide, square, vectors.
inline std::vector<std::pair<int, int>> factor_sizes(rng& r, int count, int max_m, int max_n) {
  std::vector<std::pair<int, int>> s = {{1, 1}, {max_m, 1}, {1, max_n}, {max_n, max_n}};
  while (int(s.size()) < count) s.push_back({r.uniform_int(1, max_m), r.uniform_int(1, max_n)});
  return s;
}

TYPED_TEST_P(batched_test, qr_thin) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(12);
  auto sizes = factor_sizes(r, 40, 96, 48);
  std::vector<dense<T>> a, rr;
  std::vector<int> ms, ns;
  for (auto [m, n] : sizes) {
    a.push_back(r.template normal<T>(m, n));
    rr.push_back(nan_matrix<T>(std::min(m, n), n));
    ms.push_back(m), ns.push_back(n);
  }
  auto A = make_batch<T, Space>(a), R = make_batch<T, Space>(rr);
  buffer<int, Space> M(default_context<Space>(), ms), N(default_context<Space>(), ns);
  detail::qr_vbatched(this->ctx(), M.data(), N.data(), A.pointers(), A.ld(), R.pointers(), R.ld(), A.count(),
                      A.max_rows(), A.max_cols());
  auto q = read_batch(A), rf = read_batch(R);
  for (int i = 0; i < A.count(); ++i) {
    const int m = ms[i], n = ns[i], p = std::min(m, n);
    const dense<double> Q = q[i].leftCols(p).template cast<double>(), Rm = rf[i].template cast<double>();
    EXPECT_LT((Q.transpose() * Q - dense<double>::Identity(p, p)).norm(), tol<T>(50)) << m << "x" << n;
    EXPECT_LT(relative_error(Q * Rm, a[i]), tol<T>(50)) << m << "x" << n;
    for (int j = 0; j < n; ++j)
      for (int ii = j + 1; ii < p; ++ii) EXPECT_EQ(rf[i](ii, j), T(0)) << "R not upper, item " << i;
  }
  // R alone (no Q formed): the same triangle as the full QR.
  auto A2 = make_batch<T, Space>(a), R2 = make_batch<T, Space>(rr);
  detail::qr_r_vbatched(this->ctx(), M.data(), N.data(), A2.pointers(), A2.ld(), R2.pointers(), R2.ld(), A2.count(),
                        A2.max_rows(), A2.max_cols());
  auto r2 = read_batch(R2);
  for (int i = 0; i < A.count(); ++i) EXPECT_LT(relative_error(r2[i], rf[i]), tol<T>(10)) << "item " << i;
}

TYPED_TEST_P(batched_test, qr_column_pivoted_reveals_rank) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(13);
  const int count = 30;
  std::vector<dense<T>> a, rr;
  std::vector<int> ms, ns, ranks;
  for (int i = 0; i < count; ++i) {
    const int m = r.uniform_int(1, 80), n = r.uniform_int(1, 40), p = std::min(m, n);
    const int rank = i % 3 == 0 ? p : r.uniform_int(0, p);  // a third full rank, the rest deficient
    // Exactly known singular values 10^(-j/rank) in [0.1, 1] (orthonormal factors around a graded
    // diagonal): far above the tolerance, and float rounding (~1e-6) far below it, so the rank is unambiguous.
    const dense<double> qm = reference::orthonormal_columns(r.template normal<double>(m, m));
    const dense<double> qn = reference::orthonormal_columns(r.template normal<double>(n, n));
    Eigen::VectorXd sv(rank);
    for (int j = 0; j < rank; ++j) sv(j) = std::pow(10.0, -1.0 * j / std::max(rank, 1));
    const dense<double> x = qm.leftCols(rank) * sv.asDiagonal(), y = qn.leftCols(rank).transpose();
    a.push_back((x * y).template cast<T>());
    rr.push_back(nan_matrix<T>(p, n));
    ms.push_back(m), ns.push_back(n), ranks.push_back(rank);
  }
  auto A = make_batch<T, Space>(a), R = make_batch<T, Space>(rr);
  std::vector<dense<int>> perm0;
  for (int n : ns) perm0.push_back(dense<int>::Constant(n, 1, -1));
  auto P = make_batch<int, Space>(perm0);
  buffer<int, Space> M(default_context<Space>(), ms), N(default_context<Space>(), ns), rank(default_context<Space>(), count);
  const T rel_tol = std::is_same_v<T, float> ? T(1e-4) : T(1e-10);
  detail::cpqr_vbatched(this->ctx(), M.data(), N.data(), A.pointers(), A.ld(), R.pointers(), R.ld(), P.pointers(),
                        rank.data(), rel_tol, count, A.max_rows(), A.max_cols());
  auto q = read_batch(A), rf = read_batch(R);
  auto perm = read_batch(P);
  auto got_rank = rank.to_host();
  for (int i = 0; i < count; ++i) {
    const int m = ms[i], n = ns[i], p = std::min(m, n);
    EXPECT_EQ(got_rank[i], ranks[i]) << m << "x" << n;
    std::vector<int> pv(perm[i].data(), perm[i].data() + n), sorted = pv;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> iota(n);
    std::iota(iota.begin(), iota.end(), 0);
    ASSERT_EQ(sorted, iota) << "not a permutation, item " << i;
    dense<double> ap(m, n);
    for (int j = 0; j < n; ++j) ap.col(j) = a[i].col(pv[j]).template cast<double>();
    const dense<double> Q = q[i].leftCols(p).template cast<double>(), Rm = rf[i].template cast<double>();
    EXPECT_LT(relative_error(Q * Rm, ap), tol<T>(50)) << m << "x" << n;
    // Q columns beyond the numerical rank span noise, but the leading ones must be orthonormal.
    const int k = got_rank[i];
    EXPECT_LT((Q.leftCols(k).transpose() * Q.leftCols(k) - dense<double>::Identity(k, k)).norm(), tol<T>(50));
    // Non-increasing |R(j, j)|, up to rounding relative to |R(0, 0)|: past the rank the entries are
    // rounding noise (CI saw 1.8e-166 after 2.1e-168).
    for (int j = 1; j < p; ++j)
      EXPECT_LE(std::abs(Rm(j, j)), std::abs(Rm(j - 1, j - 1)) * (1 + tol<T>(100)) + tol<T>(100) * std::abs(Rm(0, 0)));
  }
}

TYPED_TEST_P(batched_test, svd_thin) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(14);
  auto sizes = factor_sizes(r, 30, 64, 64);
  std::vector<dense<T>> a, s0, v0;
  std::vector<int> ms, ns;
  for (auto [m, n] : sizes) {
    a.push_back(r.template normal<T>(m, n));
    s0.push_back(nan_matrix<T>(std::min(m, n), 1));
    v0.push_back(nan_matrix<T>(n, std::min(m, n)));
    ms.push_back(m), ns.push_back(n);
  }
  // Graded spectra 22 .. 1e-13 (ARA's sharpening sees these): Eigen 3.4's BDCSVD got U S V^T wrong
  // by 5e-6 relative on such a 171 x 42 input.
  for (auto [m, n] : {std::pair{171, 42}, std::pair{212, 32}, std::pair{64, 64}, std::pair{42, 90}}) {
    const int p = std::min(m, n);
    const dense<double> qu = reference::orthonormal_columns(r.template normal<double>(m, p));
    const dense<double> qv = reference::orthonormal_columns(r.template normal<double>(n, p));
    Eigen::VectorXd sv(p);
    for (int j = 0; j < p; ++j) sv(j) = 22 * std::exp(-std::log(22e13) * j / (p - 1));
    a.push_back((qu * sv.asDiagonal() * qv.transpose()).template cast<T>());
    s0.push_back(nan_matrix<T>(p, 1)), v0.push_back(nan_matrix<T>(n, p));
    ms.push_back(m), ns.push_back(n);
  }
  // Exactly zero rows and columns, as zero-padded weights have: Eigen 3.4's BDCSVD indexed out of bounds
  // on such a matrix of HARA's recompression (svd.hpp takes them out first; the fallback build runs this).
  for (auto [m, n, zero_rows, zero_cols] : {std::tuple{60, 24, 5, 4}, std::tuple{32, 32, 10, 12}}) {
    dense<T> z = r.template normal<T>(m, n);
    z.bottomRows(zero_rows).setZero();
    z.rightCols(zero_cols).setZero();
    z.row(1).setZero(), z.col(2).setZero();
    a.push_back(z);
    s0.push_back(nan_matrix<T>(std::min(m, n), 1)), v0.push_back(nan_matrix<T>(n, std::min(m, n)));
    ms.push_back(m), ns.push_back(n);
  }
  // The space's primitive, then the batch-level svd() and its QR-first route (svd_after_qr, which svd()
  // takes on the GPU), and the QR-first route without V.
  for (int route = 0; route < 4; ++route) {
    SCOPED_TRACE(route == 0 ? "svd_vbatched" : route == 1 ? "svd()" : route == 2 ? "svd_after_qr" : "svd_after_qr, no V");
    auto A = make_batch<T, Space>(a), S = make_batch<T, Space>(s0), V = make_batch<T, Space>(v0);
    buffer<int, Space> M(default_context<Space>(), ms), N(default_context<Space>(), ns);
    if (route == 0)
      detail::svd_vbatched(this->ctx(), M.data(), N.data(), A.pointers(), A.ld(), S.pointers(), V.pointers(), V.ld(),
                           A.count(), A.max_rows(), A.max_cols());
    else if (route == 1) detail::svd(A.items(), S.items(), &V.items());
    else detail::svd_after_qr(A.items(), S.items(), route == 2 ? &V.items() : nullptr);
    auto u = read_batch(A), s = read_batch(S), v = read_batch(V);
    for (int i = 0; i < A.count(); ++i) {
      const int m = ms[i], n = ns[i], p = std::min(m, n);
      const dense<double> ad = a[i].template cast<double>();
      const Eigen::VectorXd ref = reference::singular_values(ad);
      const dense<double> U = u[i].leftCols(p).template cast<double>();
      const Eigen::VectorXd sv = s[i].col(0).template cast<double>();
      EXPECT_LT((sv - ref).norm() / ref(0), tol<T>(50)) << m << "x" << n;
      for (int j = 1; j < p; ++j) EXPECT_GE(sv(j - 1), sv(j));
      EXPECT_LT((U.transpose() * U - dense<double>::Identity(p, p)).norm(), tol<T>(50)) << m << "x" << n;
      if (route == 3) {  // no V: U S U^T A's range only, U^T A = S V^T
        EXPECT_TRUE(v[i].array().isNaN().all()) << "V written: " << m << "x" << n;
        EXPECT_LT(relative_error(dense<double>(U * (U.transpose() * ad)), ad), tol<T>(50)) << m << "x" << n;
        continue;
      }
      const dense<double> Vm = v[i].template cast<double>();
      EXPECT_LT(relative_error(U * sv.asDiagonal() * Vm.transpose(), ad), tol<T>(50)) << m << "x" << n;
      EXPECT_LT((Vm.transpose() * Vm - dense<double>::Identity(p, p)).norm(), tol<T>(50)) << m << "x" << n;
    }
  }
}

// Items of up to 300 rows: the host factors those above 64 in 64-column panels (a failure in a later
// panel too); the GPU those past its shared memory (n > 240 on Hopper) through cuSOLVER, with the same
// failure semantics (the last items: one factored, one with a NaN pivot, one with an infinite pivot before a
// negative one, which must fail at the infinite one).
TYPED_TEST_P(batched_test, cholesky_factors_and_reports_failures) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(15);
  const int count = 36;
  std::vector<dense<T>> g;
  std::vector<int> ns, expected_info;
  for (int i = 0; i < count; ++i) {
    const int n = i < 4 ? 130 + 37 * i : i == 33 ? 300 : i >= 34 ? 270 : r.uniform_int(1, 72);
    dense<double> x = r.template normal<double>(n, n + 3);
    dense<double> spd = x * x.transpose() + 0.1 * dense<double>::Identity(n, n);
    int info = 0;
    if (i % 4 == 3 || i == 34) {  // not positive definite from column j on
      const int j = i == 34 ? 150 : r.uniform_int(0, n - 1);
      spd = dense<double>::Identity(n, n);
      spd(j, j) = i % 8 == 7 || i == 34 ? std::numeric_limits<double>::quiet_NaN() : -1.0;  // NaN pivots fail too
      info = j + 1;
    }
    if (i == 35) {  // an infinite pivot fails where it stands, not at a later negative one
      spd = dense<double>::Identity(n, n);
      spd(100, 100) = std::numeric_limits<double>::infinity(), spd(200, 200) = -1.0;
      info = 101;
    }
    dense<T> full = spd.template cast<T>();
    full.template triangularView<Eigen::StrictlyUpper>().setConstant(std::numeric_limits<T>::quiet_NaN());
    g.push_back(full);  // the strict upper triangle must not be read
    ns.push_back(n), expected_info.push_back(info);
  }
  auto G = make_batch<T, Space>(g);
  buffer<int, Space> N(default_context<Space>(), ns), info(default_context<Space>(), count);
  detail::potrf_vbatched(this->ctx(), N.data(), G.pointers(), G.ld(), info.data(), count, G.max_rows());
  auto l = read_batch(G);
  auto got_info = info.to_host();
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(got_info[i], expected_info[i]) << "item " << i;
    if (expected_info[i]) continue;
    const dense<double> L = l[i].template cast<double>().template triangularView<Eigen::Lower>();
    dense<double> ref = g[i].template cast<double>().template selfadjointView<Eigen::Lower>();
    EXPECT_LT(relative_error(L * L.transpose(), ref), tol<T>(20)) << "n = " << ns[i];
  }
  // Uniform batches, small and large.
  for (const int n : {24, 260}) {
    const int items = n < 100 ? 20 : 2;
    std::vector<dense<T>> h;
    for (int i = 0; i < items; ++i) {
      dense<double> x = r.template normal<double>(n, n);
      h.push_back((x * x.transpose() + dense<double>::Identity(n, n)).template cast<T>());
    }
    auto H = make_batch<T, Space>(h);
    buffer<int, Space> info2(default_context<Space>(), items);
    detail::potrf_batched(this->ctx(), n, H.pointers(), n, info2.data(), items);
    auto l2 = read_batch(H);
    auto got2 = info2.to_host();
    for (int i = 0; i < items; ++i) {
      EXPECT_EQ(got2[i], 0) << "n = " << n;
      const dense<double> L = l2[i].template cast<double>().template triangularView<Eigen::Lower>();
      EXPECT_LT(relative_error(L * L.transpose(), h[i]), tol<T>(20)) << "n = " << n;
    }
  }
}

// The float path factors in double: an ill-conditioned float Gram matrix (kappa ~ 1e6) still
// gives a factor accurate to float rounding of the factor itself, not kappa * eps_float.
TYPED_TEST_P(batched_test, cholesky_of_float_data_computes_in_double) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  if constexpr (std::is_same_v<T, float>) {
    rng r(16);
    for (const int n : {40, 260}) {  // the GPU's kernel, and its cuSOLVER path past shared memory
      dense<double> q = reference::orthonormal_columns(r.template normal<double>(n, n));
      Eigen::VectorXd ev(n);
      for (int j = 0; j < n; ++j) ev(j) = std::pow(10.0, -6.0 * j / (n - 1));
      const dense<float> g = (q * ev.asDiagonal() * q.transpose()).template cast<float>();
      auto G = make_batch<float, Space>({g});
      buffer<int, Space> info(default_context<Space>(), 1);
      detail::potrf_batched(this->ctx(), n, G.pointers(), n, info.data(), 1);
      ASSERT_EQ(info.to_host()[0], 0) << "n = " << n;
      const dense<double> L = to_dense(G.item(0)).template cast<double>().template triangularView<Eigen::Lower>();
      // Exact Cholesky of the float data in double, for comparison.
      const dense<double> Lref = reference::cholesky_lower(g.template cast<double>());
      EXPECT_LT(relative_error(L, Lref), 5e-7) << "n = " << n;
    }
  } else {
    GTEST_SKIP() << "float only";
  }
}

TYPED_TEST_P(batched_test, trsm_all_variants) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(17);
  for (side s : {side::left, side::right})
    for (uplo ul : {uplo::lower, uplo::upper})
      for (op tr : both_ops)
        for (diag dg : {diag::non_unit, diag::unit}) {
          const int count = 12;
          std::vector<dense<T>> a, b, bu;
          std::vector<int> ms, ns;
          const int mu = 17, nu = 6;
          for (int i = 0; i < count; ++i) {
            // Up to 150: the host solves triangles above 64 in blocks of 64. Items 0 and 1 have larger
            // triangles: the CUDA kernel takes up to 192 (double) or 384 (float) rows on the left and 256
            // columns on the right, cuBLAS's trsm the rest, item by item, beside the kernel's items.
            int m = r.uniform_int(1, 150), n = r.uniform_int(1, 150);
            if (i < 2) (s == side::left ? m : n) = i == 0 ? r.uniform_int(390, 420) : r.uniform_int(200, 250);
            const int k = s == side::left ? m : n;
            // Well conditioned also with a unit diagonal: off-diagonal entries of size 1/k.
            dense<T> t = r.template normal<T>(k, k) / T(k);
            t.diagonal().array() = t.diagonal().array().abs() + T(1);
            a.push_back(t);
            b.push_back(r.template normal<T>(m, n));
            ms.push_back(m), ns.push_back(n);
          }
          auto A = make_batch<T, Space>(a), B = make_batch<T, Space>(b);
          buffer<int, Space> M(default_context<Space>(), ms), N(default_context<Space>(), ns);
          const T alpha = T(1.5);
          detail::trsm_vbatched(this->ctx(), s, ul, tr, dg, M.data(), N.data(), alpha, (const T* const*)A.pointers(),
                                A.ld(), B.pointers(), B.ld(), count, B.max_rows(), B.max_cols());
          auto x = read_batch(B);
          auto reference = [&](const dense<T>& tri, const dense<T>& rhs) {
            dense<double> t = tri.template cast<double>();
            dense<double> tt = ul == uplo::lower ? dense<double>(t.template triangularView<Eigen::Lower>())
                                                 : dense<double>(t.template triangularView<Eigen::Upper>());
            if (dg == diag::unit) tt.diagonal().setOnes();
            if (tr == op::transpose) tt.transposeInPlace();
            const dense<double> rh = double(alpha) * rhs.template cast<double>();
            return s == side::left ? dense<double>(tt.partialPivLu().solve(rh))
                                   : dense<double>(tt.transpose().partialPivLu().solve(rh.transpose()).transpose());
          };
          for (int i = 0; i < count; ++i)
            EXPECT_LT(relative_error(x[i], reference(a[i], b[i])), tol<T>(50))
                << "side " << int(s) << " uplo " << int(ul) << " op " << int(tr) << " diag " << int(dg);
          if (ul == uplo::lower && tr == op::none && dg == diag::non_unit) {  // alpha = 0: B := 0, A not read
            detail::trsm_vbatched(this->ctx(), s, ul, tr, dg, M.data(), N.data(), T(0), (const T* const*)A.pointers(),
                                  A.ld(), B.pointers(), B.ld(), count, B.max_rows(), B.max_cols());
            const auto zeros = read_batch(B);
            for (int i = 0; i < count; ++i) EXPECT_EQ(zeros[i].cwiseAbs().maxCoeff(), T(0)) << "item " << i;
          }
          // Uniform batch with cuBLAS (CUDA) / the same loop (host).
          std::vector<dense<T>> au, buv;
          for (int i = 0; i < count; ++i) {
            const int k = s == side::left ? mu : nu;
            dense<T> t = r.template normal<T>(k, k) / T(k);
            t.diagonal().array() = t.diagonal().array().abs() + T(1);
            au.push_back(t);
            buv.push_back(r.template normal<T>(mu, nu));
          }
          auto AU = make_batch<T, Space>(au), BU = make_batch<T, Space>(buv);
          detail::trsm_batched(this->ctx(), s, ul, tr, dg, mu, nu, alpha, (const T* const*)AU.pointers(), AU.rows(0),
                               BU.pointers(), mu, count);
          auto xu = read_batch(BU);
          for (int i = 0; i < count; ++i) EXPECT_LT(relative_error(xu[i], reference(au[i], buv[i])), tol<T>(50));
        }
}

TYPED_TEST_P(batched_test, sum_of_squares_matches_the_reference) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(23);
  for (int n : {0, 1, 1000, 3000001}) {
    const dense<T> v = r.template normal<T>(n, 1);
    buffer<T, Space> b(default_context<Space>(), std::vector<T>(v.data(), v.data() + n));
    const double want = v.template cast<double>().squaredNorm();
    EXPECT_NEAR(detail::sum_of_squares(this->ctx(), b.data(), std::size_t(n)), want, 1e-12 * std::max(want, 1.0)) << n;
  }
  std::vector<T> bad(1000, T(1));
  bad[777] = std::numeric_limits<T>::quiet_NaN();
  buffer<T, Space> b(default_context<Space>(), bad);
  EXPECT_FALSE(std::isfinite(detail::sum_of_squares(this->ctx(), b.data(), bad.size())));
}

TYPED_TEST_P(batched_test, scale_2d_scales_a_block_and_zeroes_without_reading) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(29);
  const int rows = 37, cols = 5, ld = 41;
  dense<T> y = r.template normal<T>(ld, cols);
  y(3, 2) = std::numeric_limits<T>::quiet_NaN();  // inside the block: beta == 0 must not read it
  for (T beta : {T(0), T(-2.5)}) {
    buffer<T, Space> b(default_context<Space>(), std::vector<T>(y.data(), y.data() + y.size()));
    detail::scale_2d(this->ctx(), rows, cols, beta, b.data(), ld);
    const std::vector<T> got = b.to_host();
    for (int j = 0; j < cols; ++j)
      for (int i = 0; i < ld; ++i) {
        const T was = y(i, j), now = got[i + std::size_t(j) * ld];
        if (i >= rows) EXPECT_TRUE(now == was || (std::isnan(now) && std::isnan(was))) << i << "," << j;  // outside
        else if (beta == T(0)) EXPECT_EQ(now, T(0)) << i << "," << j;
        else if (!std::isnan(was)) EXPECT_EQ(now, beta * was) << i << "," << j;
      }
  }
}

TYPED_TEST_P(batched_test, random_fills_are_reproducible_per_item) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(18);
  std::vector<dense<T>> z;
  std::vector<int> ms, ns;
  for (int i = 0; i < 25; ++i) {
    const int m = r.uniform_int(0, 90), n = r.uniform_int(0, 9);
    z.push_back(nan_matrix<T>(m, n));
    ms.push_back(m), ns.push_back(n);
  }
  auto fill = [&](std::uint64_t seed) {
    auto Z = make_batch<T, Space>(z);
    buffer<int, Space> M(default_context<Space>(), ms), N(default_context<Space>(), ns);
    detail::fill_random_vbatched(this->ctx(), detail::distribution::normal, M.data(), N.data(), Z.pointers(), Z.ld(),
                                 seed, Z.count(), Z.max_rows(), Z.max_cols());
    return read_batch(Z);
  };
  const auto x = fill(test_seed()), y = fill(test_seed()), w = fill(test_seed() + 7);
  double sum = 0, sq = 0, count = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(x[i].hasNaN()) << "unwritten entries in item " << i;
    EXPECT_EQ(x[i], y[i]);
    if (x[i].size() > 4) EXPECT_NE(x[i], w[i]);
    sum += x[i].template cast<double>().sum(), sq += x[i].template cast<double>().squaredNorm(), count += x[i].size();
  }
  // Items are independent streams, not copies of one another.
  for (std::size_t i = 1; i < x.size(); ++i)
    if (x[i].rows() >= 4 && x[i - 1].rows() >= 4 && x[i].cols() && x[i - 1].cols())
      EXPECT_NE(x[i].col(0).head(4), x[i - 1].col(0).head(4));
  EXPECT_LT(std::abs(sum / count), 5 / std::sqrt(count));
  EXPECT_NEAR(sq / count, 1.0, 0.1);
}

// batch: the shape it finds (uniform, strided) decides the kernel; every kind gives the reference.
// Items of one allocation in four layouts: at a fixed stride (strided gemm), uniform at scattered
// offsets (pointer arrays), of different sizes (variable-size), at a fixed negative stride (pointer
// arrays: strided-batched BLAS documents no negative stride); then copies (one transposed) and zero().
TYPED_TEST_P(batched_test, batches_pick_their_kernel_and_match_the_reference) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto ctx = default_context<Space>();
  rng r(19);
  const int count = 23, m = 7, n = 5, k = 6;
  const std::int64_t slot = 128;  // room for one item of up to 8 x 8, or two of 7 x 5 in the copies
  // Three operands' storage (A, B, C), every slot random.
  std::vector<dense<T>> host;
  for (int j = 0; j < 3; ++j) host.push_back(r.template normal<T>(int(slot), count));
  std::vector<buffer<T, Space>> store;
  for (auto& h : host) store.emplace_back(ctx, std::vector<T>(h.data(), h.data() + h.size()));
  auto item = [&](int which, std::int64_t at, int rows, int cols) {  // slot `at` as a rows x cols matrix
    return Eigen::Map<const dense<T>>(host[which].data() + at * slot, rows, cols);
  };
  std::vector<int> scattered(count);
  std::iota(scattered.begin(), scattered.end(), 0);
  for (int i = count - 1; i > 0; --i) std::swap(scattered[i], scattered[r.uniform_int(0, i)]);
  for (int layout = 0; layout < 4; ++layout) {
    detail::batch<const T, Space> A(ctx), B(ctx);
    detail::batch<T, Space> C(ctx);
    std::vector<int> at(count), ms(count), ns(count), ks(count);
    for (int i = 0; i < count; ++i) {
      at[i] = layout == 1 ? scattered[i] : layout == 3 ? count - 1 - i : i;
      ms[i] = layout == 2 ? r.uniform_int(0, 8) : m, ns[i] = layout == 2 ? r.uniform_int(1, 8) : n;
      ks[i] = layout == 2 ? r.uniform_int(0, 8) : k;
      A.add(store[0].data() + at[i] * slot, ks[i], ms[i], std::max(ks[i], 1));  // op(A) = A^T: m x k
      B.add(store[1].data() + at[i] * slot, ks[i], ns[i], std::max(ks[i], 1));
      C.add(store[2].data() + at[i] * slot, ms[i], ns[i], 8);
    }
    EXPECT_EQ(C.uniform(), layout != 2);
    EXPECT_EQ(C.stride().has_value(), layout == 0 || layout == 2);  // layout 2: strided items of different shapes
    // Layout 1 keeps its arrays in a room the call holds (as the H2 product's workspace does): exactly
    // the call's own staged sizes and three batches' worth, taken in the order of the arguments, and
    // the sizes go up with the batches' arrays.
    const std::vector<std::int64_t> sizes{3, 1, 4, 1, 5};
    const std::size_t arrays = detail::batch<T, Space>::array_bytes_of(std::size_t(count)),
                      staged = detail::batch_array_room<Space>::template staged_bytes<std::int64_t>(sizes.size()),
                      room_bytes = staged + 3 * arrays;
    buffer<std::byte, Space> room_memory(ctx, layout == 1 ? room_bytes : 0);
    detail::batch_array_room<Space> room(room_memory.data(), room_memory.size());
    const std::int64_t* sizes_at = nullptr;
    if (layout == 1) {
      sizes_at = room.stage(sizes.data(), sizes.size());
      A.keep_arrays_in(room), B.keep_arrays_in(room), C.keep_arrays_in(room);
    }
    if (layout == 0) EXPECT_EQ(*C.stride(), slot);
    if (layout == 2) {  // the batches' arrays in one upload (C named twice), as the space holds them
      detail::upload_together(A, B, C, C);
      EXPECT_TRUE(A.uploaded() && B.uploaded() && C.uploaded());
      std::vector<int> rows(count), cols(count), ld(count);
      std::vector<T*> pointers(count);
      detail::download_2d(*ctx, count, 1, C.in_space().rows, count, rows.data(), count);
      detail::download_2d(*ctx, count, 1, B.in_space().cols, count, cols.data(), count);
      detail::download_2d(*ctx, count, 1, A.in_space().ld, count, ld.data(), count);
      detail::download_2d(*ctx, count, 1, C.in_space().pointers, count, pointers.data(), count);
      for (int i = 0; i < count; ++i) {
        EXPECT_EQ(rows[i], ms[i]);
        EXPECT_EQ(cols[i], ns[i]);
        EXPECT_EQ(ld[i], std::max(ks[i], 1));
        EXPECT_EQ(pointers[i], store[2].data() + at[i] * slot);
      }
    }
    detail::gemm(op::transpose, op::none, T(0.5), A, B, T(-1), C);
    if (layout == 1) {
      EXPECT_EQ(room.used(), room_bytes);
      EXPECT_EQ(reinterpret_cast<const std::byte*>(sizes_at), room_memory.data());
      EXPECT_EQ(reinterpret_cast<const std::byte*>(A.in_space().pointers), room_memory.data() + staged);
      EXPECT_EQ(reinterpret_cast<const std::byte*>(C.in_space().pointers), room_memory.data() + staged + 2 * arrays);
      std::vector<std::int64_t> sent(sizes.size());
      detail::download_2d(*ctx, sizes.size(), 1, sizes_at, sizes.size(), sent.data(), sizes.size());
      EXPECT_EQ(sent, sizes);
    }
    const auto got = store[2].to_host();
    for (int i = 0; i < count; ++i) {
      const dense<double> ref = 0.5 * item(0, at[i], ks[i], ms[i]).template cast<double>().transpose() *
                                    item(1, at[i], ks[i], ns[i]).template cast<double>() -
                                item(2, at[i], 8, ns[i]).topRows(ms[i]).template cast<double>();
      const dense<T> out = Eigen::Map<const dense<T>>(got.data() + at[i] * slot, 8, ns[i]).topRows(ms[i]);
      EXPECT_LT(relative_error(out, ref), tol<T>(10)) << "layout " << layout << " item " << i;
    }
    store[2] = buffer<T, Space>(ctx, std::vector<T>(host[2].data(), host[2].data() + host[2].size()));
  }
  {  // A room planned too small is an error, not an overrun.
    detail::batch<T, Space> X(ctx);
    X.add(store[2].data(), 2, 2, 8).add(store[2].data() + slot, 3, 2, 8);
    buffer<std::byte, Space> memory(ctx, 16);
    detail::batch_array_room<Space> small(memory.data(), memory.size());
    X.keep_arrays_in(small);
    EXPECT_THROW((void)X.in_space(), h2expr::error);
    EXPECT_EQ(small.used(), 0u);
    // Staged values: past the room an error too; within it they go up when the call sends them.
    const std::int64_t values[3] = {7, -8, 9};
    EXPECT_THROW((void)small.stage(values, 3), h2expr::error);
    const std::int64_t* at = small.stage(values, 2);
    small.send(*ctx);
    std::int64_t sent[2] = {0, 0};
    detail::download_2d(*ctx, 2, 1, at, 2, sent, 2);
    EXPECT_EQ(sent[0], 7);
    EXPECT_EQ(sent[1], -8);
    EXPECT_EQ(small.used(), 16u);
  }
  // Copies: C_i = A_i (uniform, pointer arrays), then C_i = B_i^T (variable-size path), then zero().
  detail::batch<const T, Space> A(ctx), B(ctx);
  detail::batch<T, Space> C(ctx), Ct(ctx);
  for (int i = 0; i < count; ++i) {
    A.add(store[0].data() + scattered[i] * slot, m, n, m), C.add(store[2].data() + i * slot, m, n, 8);
    B.add(store[1].data() + i * slot, n, m, n), Ct.add(store[2].data() + i * slot + 8 * n, m, n, m);
  }
  detail::copy(A, C);
  detail::copy(B, Ct, op::transpose);
  auto got = store[2].to_host();
  for (int i = 0; i < count; ++i) {
    EXPECT_EQ(dense<T>(Eigen::Map<const dense<T>>(got.data() + i * slot, 8, n).topRows(m)),
              dense<T>(item(0, scattered[i], m, n)));
    EXPECT_EQ(dense<T>(Eigen::Map<const dense<T>>(got.data() + i * slot + 8 * n, m, n)),
              dense<T>(item(1, i, n, m).transpose()));
  }
  detail::zero(C);
  got = store[2].to_host();
  for (int i = 0; i < count; ++i) {
    EXPECT_TRUE(Eigen::Map<const dense<T>>(got.data() + i * slot, 8, n).topRows(m).isZero(0));
    EXPECT_EQ(got[std::size_t(i * slot + m)], host[2](m, i)) << "a row past the item was written";
  }
  // A malformed item raises.
  EXPECT_THROW(C.add(store[2].data(), 9, 1, 8), h2expr::error);
}

// Cholesky QR halves (ARA): the Gram matrix is exact in double, A W has orthonormal columns, d is
// |diag(R)| of A's QR, and dependent or zero columns are dropped (moved to the end of W as zero
// columns) instead of normalised into noise. A tall item (m > 1024) takes the chunked Gram path on the GPU.
TYPED_TEST_P(batched_test, cholesky_qr_orthonormalizes_and_drops_dependent_columns) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(21);
  const int count = 41;
  const double drop = std::is_same_v<T, float> ? 1e-5 : 1e-7;  // the Gram matrix resolves ~sqrt(eps)
  std::vector<dense<T>> a;
  std::vector<std::vector<int>> dependent(count);
  std::vector<dense<double>> g_shape, d_shape;
  std::vector<int> ns;
  for (int i = 0; i < count; ++i) {
    const int n = i == 1 ? 0 : r.uniform_int(1, 64);
    const int m = i == 0 ? 3000 : i == 2 ? 0 : r.uniform_int(2 * n, 300);  // well conditioned when full rank
    dense<T> x = r.template normal<T>(m, n);
    if (m > 0 && i % 3 == 0 && n > 3) {  // one column a combination of the two before it, another zero
      const int j0 = r.uniform_int(2, n - 1);
      x.col(j0) = T(0.5) * x.col(j0 - 1) + T(2) * x.col(j0 - 2);
      int j1 = r.uniform_int(0, n - 1);
      while (j1 == j0 || j1 == j0 - 1 || j1 == j0 - 2) j1 = (j1 + 1) % n;
      x.col(j1).setZero();
      dependent[i] = {j0, j1};
    }
    if (m == 0) for (int j = 0; j < n; ++j) dependent[i].push_back(j);
    a.push_back(x), ns.push_back(n);
    g_shape.push_back(dense<double>::Zero(n, n)), d_shape.push_back(dense<double>::Zero(n, 1));
  }
  auto A = make_batch<T, Space>(a);
  auto G = make_batch<double, Space>(g_shape);
  auto D = make_batch<double, Space>(d_shape), C = make_batch<double, Space>(d_shape);
  std::vector<dense<T>> w_zero;
  for (int n : ns) w_zero.push_back(dense<T>::Zero(n, n));
  auto W = make_batch<T, Space>(w_zero);
  buffer<int, Space> N(default_context<Space>(), ns), info(default_context<Space>(), count);
  detail::gram_vbatched<T>(this->ctx(), A.rows(), A.cols(), A.pointers(), A.ld(), G.pointers(), G.ld(), count,
                           A.max_rows(), A.max_cols());
  detail::cholqr_factor_vbatched<T>(this->ctx(), N.data(), G.pointers(), G.ld(), W.pointers(), W.ld(), D.pointers(),
                                    C.pointers(), drop, info.data(), count, W.max_rows());
  auto g = read_batch(G);
  auto w = read_batch(W);
  auto d = read_batch(D);
  auto c = read_batch(C);
  auto inf = info.to_host();
  for (int i = 0; i < count; ++i) {
    SCOPED_TRACE("item " + std::to_string(i) + ", " + std::to_string(a[i].rows()) + " x " + std::to_string(ns[i]));
    EXPECT_EQ(inf[i], 0);
    const dense<double> ad = a[i].template cast<double>();
    EXPECT_LT(relative_error(g[i], ad.transpose() * ad), 1e-13);
    if (ns[i] == 0) continue;
    EXPECT_LT(relative_error(c[i], ad.colwise().norm().transpose()), 1e-13);
    // W is compacted: A W = [Q, 0] with the kept columns first, d = [diag(R) of the kept, 0].
    const dense<double> q = ad * w[i].template cast<double>();
    const int kept = ns[i] - int(dependent[i].size());
    for (int j = 0; j < ns[i]; ++j) {
      if (j < kept) EXPECT_GT(d[i](j, 0), 0.0) << "column " << j;
      else EXPECT_EQ(d[i](j, 0), 0.0) << "column " << j;
      if (j >= kept) EXPECT_EQ(w[i].col(j).norm(), T(0)) << "column " << j;
    }
    dense<double> expected = dense<double>::Zero(ns[i], ns[i]);
    expected.topLeftCorner(kept, kept).setIdentity();
    EXPECT_LT((q.transpose() * q - expected).norm(), tol<T>(50) * std::sqrt(double(ns[i])));
    // The kept columns span what A's independent columns span.
    if (kept > 0 && a[i].rows() > 0) {
      const dense<double> qk = q.leftCols(kept);
      EXPECT_LT((ad - qk * (qk.transpose() * ad)).norm() / ad.norm(), tol<T>(50));
    }
    if (dependent[i].empty()) {  // d = |diag(R)| of Householder QR
      const dense<double> rdiag = reference::householder_r_diagonal(ad).head(ns[i]);
      EXPECT_LT(relative_error(d[i], rdiag), tol<T>(50));
    }
  }
  // Non-finite Gram entries are reported, not factored.
  std::vector<dense<double>> bad{nan_matrix<double>(3, 3)};
  auto Gb = make_batch<double, Space>(bad);
  auto Wb = make_batch<T, Space>({dense<T>::Zero(3, 3)});
  auto Db = make_batch<double, Space>({dense<double>::Zero(3, 1)});
  buffer<int, Space> N3(default_context<Space>(), std::vector<int>{3}), info3(default_context<Space>(), 1);
  detail::cholqr_factor_vbatched<T>(this->ctx(), N3.data(), Gb.pointers(), Gb.ld(), Wb.pointers(), Wb.ld(),
                                    Db.pointers(), nullptr, drop, info3.data(), 1, 3);
  EXPECT_EQ(info3.to_host()[0], -1);
}

// Right singular pairs for truncation: with `resolve` r, every value above r is exact (to the Gram
// matrix's rounding, ~1e-8 of the largest at worst), V is orthonormal, and keeping the values above r
// leaves exactly the next true value as the error. r = 0 and wide items take the full SVD; r below
// the Gram's noise takes the split path (an SVD of the small directions); r = 0.31, far above it, the
// reduced path on the host (the pairs past those it resolves are zeros, vectors included).
TYPED_TEST_P(batched_test, svd_right_resolves_the_values_above_a_threshold) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(31);
  // The primitive, then the batch-level svd_right (on the GPU: its QR-first route, svd_after_qr).
  for (bool batch_level : {false, true})
    for (double resolve : {0.0, 3.1e-9, 3.1e-3, 0.31})  // between the values, which step by 1.7-2x
      for (auto [m, n] : {std::pair{64, 64}, std::pair{80, 48}, std::pair{30, 40}}) {
        const int p = std::min(m, n);
        const dense<double> qu = reference::orthonormal_columns(r.template normal<double>(m, p));
        const dense<double> qv = reference::orthonormal_columns(r.template normal<double>(n, p));
        Eigen::VectorXd sv(p);  // graded 22 .. 2.2e-13, as weights of a compression are
        for (int j = 0; j < p; ++j) sv(j) = 22 * std::exp(-std::log(1e14) * j / (p - 1));
        const dense<T> a = (qu * sv.asDiagonal() * qv.transpose()).template cast<T>();
        auto A = make_batch<T, Space>({a}), S = make_batch<T, Space>({nan_matrix<T>(p, 1)}),
             V = make_batch<T, Space>({nan_matrix<T>(n, p)});
        buffer<int, Space> M(default_context<Space>(), std::vector<int>{m}), N(default_context<Space>(), std::vector<int>{n});
        if (batch_level)
          detail::svd_right(A.items(), S.items(), V.items(), resolve);
        else
          detail::svd_right_vbatched(this->ctx(), M.data(), N.data(), A.pointers(), A.ld(), S.pointers(), V.pointers(),
                                     V.ld(), 1, m, n, resolve);
        const dense<double> ad = a.template cast<double>();
        const Eigen::VectorXd ref = reference::singular_values(ad);
        const Eigen::VectorXd s = read_batch(S)[0].col(0).template cast<double>();
        const dense<double> v = read_batch(V)[0].template cast<double>();
        std::ostringstream what;
        what << m << "x" << n << ", resolve " << resolve << (batch_level ? ", svd_right()" : ", svd_right_vbatched");
        Eigen::Index resolved = 0;  // the pairs computed; the rest, if any, zeros
        while (resolved < p && v.col(resolved).norm() != 0) ++resolved;
        if (resolved < p) EXPECT_EQ(v.rightCols(p - resolved).norm() + s.tail(p - resolved).norm(), 0.0) << what.str();
        if (resolve == 0) EXPECT_EQ(resolved, p) << what.str();
        if (std::is_same_v<Space, host> && resolve > 0.1 && m >= n) EXPECT_LT(resolved, p) << what.str() << ": reduced";
        EXPECT_LT((v.leftCols(resolved).transpose() * v.leftCols(resolved) - dense<double>::Identity(resolved, resolved)).norm(),
                  tol<T>(50))
            << what.str();
        // resolve 0, wide items, and float on the GPU (its SVD): the SVD in T, which svd_thin's test
        // covers; otherwise computed in double, and the small values are checked on their own scale.
        const bool full_svd = resolve == 0 || m < n || (!std::is_same_v<Space, host> && std::is_same_v<T, float>);
        int kept = 0;
        for (int j = 0; j < p; ++j) {
          if (j > 0) EXPECT_GE(s(j - 1), s(j)) << what.str();
          const double accuracy = full_svd ? tol<T>(50) * ref(0) : 1e-3 * ref(j) + 1e-11 * ref(0);
          if (ref(j) > resolve) EXPECT_NEAR(s(j), ref(j), accuracy) << what.str() << ", value " << j;
          kept += s(j) > resolve;
        }
        if (full_svd) continue;
        EXPECT_EQ(kept, (ref.array() > resolve).count()) << what.str();
        if (kept < p) {  // what truncation drops: exactly the first value not kept
          const dense<double> rest = ad - ad * v.leftCols(kept) * v.leftCols(kept).transpose();
          const double dropped = reference::singular_values(rest)(0);
          // V is stored in T: its rounding lets a float result leak ~1e-7 of the largest value
          const double stored = std::max(1e-11, 50 * double(std::numeric_limits<T>::epsilon()));
          EXPECT_NEAR(dropped, ref(kept), 1e-3 * ref(kept) + stored * ref(0)) << what.str();
        }
      }
}

// Block-sparse rows (the coupling phase of HGEMV): uniform blocks, and blocks whose output and input
// nodes each have their own size and offset (per-node ranks; zero-sized nodes and empty rows too),
// read directly or, for op::transpose, through a block permutation. Chunks of 1, 4 and 16 vectors.
TYPED_TEST_P(batched_test, bsr_gemm_uniform_and_per_node_shapes) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  auto ctx = default_context<Space>();
  rng r(23);
  const int rows = 9, cols = 7;
  for (bool uniform : {true, false})
    for (op o : both_ops)
      for (int nv : {1, 5, 20})
        for (T beta : {T(0.5), T(0)}) {
          std::vector<std::int64_t> k_out(rows), k_in(cols), at_out(rows + 1, 0), at_in(cols + 1, 0);
          const int ku = r.uniform_int(1, 40), kv = r.uniform_int(1, 40);
          for (int u = 0; u < rows; ++u) k_out[u] = uniform ? ku : (r.uniform_int(0, 5) == 0 ? 0 : r.uniform_int(1, 40));
          for (int v = 0; v < cols; ++v) k_in[v] = uniform ? kv : (r.uniform_int(0, 5) == 0 ? 0 : r.uniform_int(1, 40));
          // Nodes sit apart (gaps of 3 rows) when shaped, so the offsets are really read.
          const int gap = uniform ? 0 : 3;
          for (int u = 0; u < rows; ++u) at_out[u + 1] = at_out[u] + k_out[u] + gap;
          for (int v = 0; v < cols; ++v) at_in[v + 1] = at_in[v] + k_in[v] + gap;
          std::vector<int> ptr(1, 0), idx;
          for (int u = 0; u < rows; ++u) {
            for (int v = 0; v < cols; ++v)
              if (u == 4 ? false : r.uniform_int(0, 2) > 0) idx.push_back(v);  // row 4 stays empty
            ptr.push_back(int(idx.size()));
          }
          const int entries = int(idx.size());
          std::vector<int> blk(entries);
          std::iota(blk.begin(), blk.end(), 0);
          if (o == op::transpose) std::shuffle(blk.begin(), blk.end(), r.engine);
          // Block b of entry e: op(B_b) is k_out(u) x k_in(v), stored packed in the order of b.
          std::vector<dense<T>> B(entries);
          std::vector<std::int64_t> at_block(entries + 1, 0), size(entries);
          for (int u = 0; u < rows; ++u)
            for (int e = ptr[u]; e < ptr[u + 1]; ++e) {
              B[blk[e]] = o == op::none ? r.template normal<T>(k_out[u], k_in[idx[e]])
                                         : r.template normal<T>(k_in[idx[e]], k_out[u]);
              size[blk[e]] = B[blk[e]].size();
            }
          for (int b = 0; b < entries; ++b) at_block[b + 1] = at_block[b] + size[b];
          std::vector<T> blocks(at_block.back()), x(at_in.back() * nv), y(at_out.back() * nv);
          for (int b = 0; b < entries; ++b) std::copy_n(B[b].data(), size[b], blocks.data() + at_block[b]);
          const dense<T> X = r.template normal<T>(at_in.back(), nv);
          const dense<T> Y0 = beta == T(0) ? nan_matrix<T>(int(at_out.back()), nv) : r.template normal<T>(at_out.back(), nv);
          std::copy_n(X.data(), X.size(), x.data());
          std::copy_n(Y0.data(), Y0.size(), y.data());

          buffer<int, Space> P(ctx, ptr), I(ctx, idx), K(ctx, blk);
          buffer<T, Space> Bd(ctx, blocks), Xd(ctx, x), Yd(ctx, y);
          std::vector<std::int64_t> shape_host = k_out;
          for (const auto* part : {&at_out, &k_in, &at_in, &at_block}) shape_host.insert(shape_host.end(), part->begin(), part->end());
          buffer<std::int64_t, Space> S(ctx, shape_host);
          detail::bsr_shape shape;
          if (!uniform) {
            const std::int64_t* p = S.data();
            shape = {p, p + rows, p + 2 * rows + 1, p + 2 * rows + 1 + cols, p + 2 * rows + 2 * cols + 2};
          }
          const int mb = int(*std::max_element(k_out.begin(), k_out.end()));
          detail::bsr_gemm(*ctx, o, rows, P.data(), I.data(), o == op::none ? nullptr : K.data(), Bd.data(), mb, kv,
                           std::int64_t(ku) * kv, Xd.data(), at_in.back(), Yd.data(), at_out.back(), nv, beta, shape);
          const auto got_host = Yd.to_host();
          const Eigen::Map<const dense<T>> got(got_host.data(), at_out.back(), nv);
          for (int u = 0; u < rows; ++u) {
            dense<double> ref = dense<double>::Zero(k_out[u], nv);
            if (beta != T(0)) ref = double(beta) * Y0.middleRows(at_out[u], k_out[u]).template cast<double>();
            for (int e = ptr[u]; e < ptr[u + 1]; ++e)
              ref += op_of(B[blk[e]], o) * X.middleRows(at_in[idx[e]], k_in[idx[e]]).template cast<double>();
            const dense<T> out = got.middleRows(at_out[u], k_out[u]);
            ASSERT_FALSE(out.hasNaN()) << "row " << u;
            EXPECT_LT(relative_error(out, ref), tol<T>(50)) << "row " << u << (uniform ? " uniform" : " shaped")
                                                             << (o == op::none ? "" : " transposed") << " nv " << nv;
          }
          if (!uniform) {  // the gaps between nodes are not written
            for (int u = 0; u < rows; ++u)
              for (int g = 0; g < gap; ++g)
                for (int j = 0; j < nv; ++j) {
                  const T want = Y0(at_out[u] + k_out[u] + g, j), have = got(at_out[u] + k_out[u] + g, j);
                  EXPECT_TRUE(have == want || (std::isnan(have) && std::isnan(want))) << "gap after row " << u;
                }
          }
        }
}

REGISTER_TYPED_TEST_SUITE_P(batched_test, gemm_uniform_pointer_arrays_and_strided, gemm_large_items, gemm_nonuniform_sizes, qr_thin,
                            qr_column_pivoted_reveals_rank, svd_thin, cholesky_factors_and_reports_failures,
                            cholesky_of_float_data_computes_in_double, trsm_all_variants,
                            sum_of_squares_matches_the_reference, scale_2d_scales_a_block_and_zeroes_without_reading,
                            random_fills_are_reproducible_per_item, batches_pick_their_kernel_and_match_the_reference,
                            cholesky_qr_orthonormalizes_and_drops_dependent_columns,
                            bsr_gemm_uniform_and_per_node_shapes, svd_right_resolves_the_values_above_a_threshold);

}  // namespace h2expr::test
