#pragma once
// Batched ARA, timed on one space: the paper's Figures 3-4 (section 2.3.3). A batch of 128 x 128
// matrices with singular values s_j = t e^{-alpha j}, alpha chosen so that the rank at tol is 5..60; block size 32, r = 10. Printed per row: the time, the rate in the paper's nominal flops (the
// unblocked Algorithm 2.2 at the detected rank: samples 2mn(k+r), Gram-Schmidt 2m(k+r)^2, B = M^T Q
// 2mnk), the space's batched-gemm rate at the same sizes as the ceiling, the batched SVD of the same
// batch and the speedup over it, and the rank overshoot over the optimal (Frobenius) rank.
#include <h2expr/detail/primitives/block_batch.hpp>
#include <h2expr/h2expr.hpp>

#include <Eigen/Dense>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "timing.hpp"

namespace h2expr::bench {

struct ara_problem {
  int count, rows, cols;
  double rank_target;  // alpha = ln(1 / tol) / rank_target
};

// Host generation, as in the tests: M = U diag(s) V^T with random orthonormal U, V.
template <class T>
std::vector<Eigen::Matrix<T, -1, -1>> decaying_batch(const ara_problem& p, double tol, std::uint64_t seed,
                                                     std::vector<int>& optimal_rank) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> scale(-3, 3);
  std::vector<Eigen::Matrix<T, -1, -1>> out;
  optimal_rank.clear();
  const double alpha = std::log(1 / tol) / p.rank_target;
  for (int i = 0; i < p.count; ++i) {
    const int m = p.rows, n = p.cols, k0 = std::min(m, n);
    int k = 0;
    while (k < k0 && std::exp(-alpha * k) > 1e-14) ++k;
    Eigen::MatrixXd a(m, k), b(n, k);
    for (Eigen::Index j = 0; j < a.size(); ++j) a.data()[j] = nd(gen);
    for (Eigen::Index j = 0; j < b.size(); ++j) b.data()[j] = nd(gen);
    const Eigen::MatrixXd u = Eigen::HouseholderQR<Eigen::MatrixXd>(a).householderQ() * Eigen::MatrixXd::Identity(m, k);
    const Eigen::MatrixXd v = Eigen::HouseholderQR<Eigen::MatrixXd>(b).householderQ() * Eigen::MatrixXd::Identity(n, k);
    Eigen::VectorXd s(k);
    const double t = std::exp(scale(gen));
    for (int j = 0; j < k; ++j) s(j) = t * std::exp(-alpha * j);
    out.push_back((u * s.asDiagonal() * v.transpose()).template cast<T>());
    const double total = s.squaredNorm();
    double tail = 0;
    int r = k;
    while (r > 0 && tail + s(r - 1) * s(r - 1) <= tol * tol * total) tail += s(r - 1) * s(r - 1), --r;
    optimal_rank.push_back(r);
  }
  return out;
}

// The space's batched gemm at ARA's sizes: count x (rows x cols) times (cols x 32).
template <class T, class Space>
double batched_gemm_rate(context_ptr<Space> ctx, int count, int rows, int cols) {
  namespace hd = h2expr::detail;
  const int k = 32;
  std::vector<int> m(count, rows), n(count, k), kk(count, cols);
  hd::block_batch<T, Space> A(ctx, m, kk), B(ctx, kk, n), C(ctx, m, n);
  hd::fill_random_vbatched(*ctx, hd::distribution::normal, A.rows(), A.cols(), A.pointers(), A.ld(), 1, count, rows,
                           cols);
  hd::fill_random_vbatched(*ctx, hd::distribution::normal, B.rows(), B.cols(), B.pointers(), B.ld(), 2, count, cols, k);
  const double t = best_seconds(*ctx, [&] {
    hd::gemm_batched(*ctx, hd::op::none, hd::op::none, rows, k, cols, T(1), (const T* const*)A.pointers(), rows,
                     (const T* const*)B.pointers(), cols, T(0), C.pointers(), rows, count);
  });
  return 2.0 * rows * k * cols * count / t * 1e-9;
}

inline void print_ara_header() {
  std::printf("| %-40s | %9s | %8s | %9s | %6s | %10s | %7s | %9s | %9s | %7s |\n", "problem", "ARA (ms)", "GFLOP/s",
              "gemm rate", "of it", "SVD (ms)", "speedup", "opt rank", "overshoot", "plain +");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(42, '-').c_str(), std::string(11, '-').c_str(),
              std::string(10, '-').c_str(), std::string(11, '-').c_str(), std::string(8, '-').c_str(),
              std::string(12, '-').c_str(), std::string(9, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(9, '-').c_str());
}

template <class T, class Space>
void ara_row(context_ptr<Space> ctx, const ara_problem& p, double tol, double gemm_rate) {
  namespace hd = h2expr::detail;
  std::vector<int> optimal;
  const auto dense = decaying_batch<T>(p, tol, 7 + std::uint64_t(p.rank_target), optimal);
  std::vector<matrix<T, Space>> blocks;
  for (const auto& d : dense) blocks.emplace_back(d, ctx);
  const ara_options opt{.block_size = 32, .converge_samples = 10};
  low_rank_batch<T, Space> lr;
  const double t = best_seconds(*ctx, [&] { lr = batched_ara(blocks, tol, opt); }, 3);
  auto plain_opt = opt;
  plain_opt.sharpen = false;
  const auto plain = batched_ara(blocks, tol, plain_opt);
  double flop = 0, over = 0, plain_over = 0, opt_mean = 0;
  for (int i = 0; i < p.count; ++i) {
    const double m = p.rows, n = p.cols, k = plain.rank(i), r = opt.converge_samples;
    flop += 2 * m * n * (k + r) + 2 * m * (k + r) * (k + r) + 2 * m * n * k;
    over += lr.rank(i) - optimal[i], plain_over += plain.rank(i) - optimal[i], opt_mean += optimal[i];
  }
  // The batched SVD of the same batch (h2expr's own batched one-sided Jacobi on the GPU; Eigen on the host).
  std::vector<int> m(p.count, p.rows), n(p.count, p.cols), ps(p.count, std::min(p.rows, p.cols));
  hd::block_batch<T, Space> A(ctx, m, n), S(ctx, ps, std::vector<int>(p.count, 1)), V(ctx, n, ps);
  // One timed run: the SVD takes seconds, far beyond warm-up effects.
  for (int i = 0; i < p.count; ++i) hd::copy(*ctx, blocks[i].data(), A.item(i).data(), std::size_t(p.rows) * p.cols);
  ctx->synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  hd::svd_vbatched<T>(*ctx, A.rows(), A.cols(), A.pointers(), A.ld(), S.pointers(), V.pointers(), V.ld(), p.count,
                      p.rows, p.cols);
  ctx->synchronize();
  const double t_svd = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char name[96];
  std::snprintf(name, sizeof name, "%d x %dx%d %s, rank ~%.0f", p.count, p.rows, p.cols, sizeof(T) == 8 ? "double" : "float",
                p.rank_target);
  const double rate = flop / t * 1e-9;
  std::printf("| %-40s | %9.2f | %8.1f | %9.1f | %5.1f%% | %10.2f | %6.1fx | %9.1f | %9.2f | %7.2f |\n", name, t * 1e3,
              rate, gemm_rate, 100 * rate / gemm_rate, t_svd * 1e3, t_svd / t, opt_mean / p.count, over / p.count,
              plain_over / p.count);
  std::fflush(stdout);
}

// double at the paper's tol = 1e-6; float at 1e-4, because float samples carry rounding noise of
// ~1e-7 ||M||_F, so a certified 1e-6 is out of float's reach (our ARA then samples up to the full size
// and represents the item exactly, which is correct but measures nothing of interest).
template <class T, class Space>
void run_ara_benchmarks(context_ptr<Space> ctx, double scale) {
  const double tol = sizeof(T) == 8 ? 1e-6 : 1e-4;
  const int count = std::max(1, int(1000 * scale));
  const double gemm128 = batched_gemm_rate<T, Space>(ctx, count, 128, 128);
  std::printf("\n## %s, tol = %g, block size 32, r = 10; batched gemm %d x (128x128)(128x32): %.1f GFLOP/s\n\n",
              sizeof(T) == 8 ? "double" : "float", tol, count, gemm128);
  std::printf("Figure 3: 128 x 128, rank at tol from 5 to 60.\n\n");
  print_ara_header();
  for (double rank : {5, 10, 20, 30, 40, 47, 55, 60}) ara_row<T, Space>(ctx, {count, 128, 128, rank}, tol, gemm128);
  std::printf("\nFigure 4b: rank ~47, size from 64 to 256 (ceiling: batched gemm at each size).\n\n");
  print_ara_header();
  for (int size : {64, 128, 192, 256}) {
    const double g = batched_gemm_rate<T, Space>(ctx, count, size, size);
    ara_row<T, Space>(ctx, {count, size, size, 47}, tol, g);
  }
}

}  // namespace h2expr::bench
