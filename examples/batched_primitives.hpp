#pragma once
// Written once for any space: dense blocks of vectors, and the batched primitives that
// every H2 algorithm of h2expr is built from, checked against Eigen on the host.
#include <h2expr/detail/primitives/block_batch.hpp>
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

template <class Space>
int run_demo(const char* space_name) {
  namespace hx = h2expr;
  namespace hd = h2expr::detail;
  using clock = std::chrono::steady_clock;
  std::printf("h2expr batched primitives on the %s space\n", space_name);

  // A block of 16 random vectors, and back to Eigen.
  auto X = hx::matrix<double, Space>::random(1000, 16, /*seed=*/1);
  Eigen::MatrixXd Xd = hx::to_dense(X);
  std::printf("  X: %lld x %lld, column norms ~ sqrt(1000): %.1f\n", (long long)X.rows(), (long long)X.cols(),
              Xd.col(0).norm());

  // 2,000 products of blocks of sizes 32..64 in one batched call: C_i = A_i B_i.
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> size(32, 64);
  const int count = 2000;
  std::vector<int> m(count), n(count), k(count);
  for (int i = 0; i < count; ++i) m[i] = size(gen), n[i] = size(gen), k[i] = size(gen);
  auto ctx = hx::default_context<Space>();
  hd::block_batch<double, Space> A(ctx, m, k), B(ctx, k, n), C(ctx, m, n);
  hd::buffer<int, Space> M(ctx, m), N(ctx, n), K(ctx, k);
  hd::fill_random_vbatched(*ctx, hd::distribution::normal, A.rows(), A.cols(), A.pointers(), A.ld(), 2, count,
                           A.max_rows(), A.max_cols());
  hd::fill_random_vbatched(*ctx, hd::distribution::normal, B.rows(), B.cols(), B.pointers(), B.ld(), 3, count,
                           B.max_rows(), B.max_cols());
  const auto t0 = clock::now();
  hd::gemm_vbatched(*ctx, hd::op::none, hd::op::none, M.data(), N.data(), K.data(), 1.0,
                    (const double* const*)A.pointers(), A.ld(), (const double* const*)B.pointers(), B.ld(), 0.0,
                    C.pointers(), C.ld(), count, 64, 64, 64);
  ctx->synchronize();
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  double flops = 0, worst = 0;
  for (int i = 0; i < count; ++i) flops += 2.0 * m[i] * n[i] * k[i];
  for (int i = 0; i < count; i += 97) {  // spot checks against Eigen
    Eigen::MatrixXd ref = hx::to_dense(A.item(i)) * hx::to_dense(B.item(i));
    worst = std::max(worst, (hx::to_dense(C.item(i)) - ref).norm() / ref.norm());
  }
  std::printf("  non-uniform batched gemm: %d blocks of 32..64, %.2f GFLOP/s, max relative error %.1e\n", count,
              flops / seconds * 1e-9, worst);

  // Thin QR of every A_i in one call: A_i := Q_i, R_i upper triangular.
  hd::block_batch<double, Space> R(ctx, std::vector<int>(count, 64), k);
  hd::qr_vbatched(*ctx, A.rows(), A.cols(), A.pointers(), A.ld(), R.pointers(), R.ld(), count, 64, 64);
  Eigen::MatrixXd Q0 = hx::to_dense(A.item(0)).leftCols(std::min(m[0], k[0]));
  const double orth = (Q0.transpose() * Q0 - Eigen::MatrixXd::Identity(Q0.cols(), Q0.cols())).norm();
  std::printf("  batched QR: ||Q^T Q - I|| = %.1e for a %d x %d block\n", orth, m[0], k[0]);
  return worst < 1e-12 && orth < 1e-12 ? 0 : 1;
}
