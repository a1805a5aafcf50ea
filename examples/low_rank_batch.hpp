#pragma once
// Written once for any space: batched ARA compresses many small operators at once. The batch here is
// 1,000 interaction blocks of an exponential kernel between pairs of separated point clusters (sizes
// 64..192), the kind of block an H2 matrix stores in low rank form.
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

template <class Space>
int run_low_rank_batch(const char* space_name) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  std::printf("h2expr batched ARA on the %s space\n", space_name);

  std::mt19937 gen(11);
  std::uniform_int_distribution<int> size(64, 192);
  std::uniform_real_distribution<double> unit(0, 1);
  auto cluster = [&](int n, double cx) {  // n points in a unit square centred at (cx, 0)
    Eigen::MatrixXd p(2, n);
    for (int j = 0; j < n; ++j) p(0, j) = cx + unit(gen) - 0.5, p(1, j) = unit(gen) - 0.5;
    return p;
  };
  std::vector<hx::matrix<double, Space>> blocks;
  std::vector<Eigen::MatrixXd> dense;
  std::size_t dense_bytes = 0;
  for (int i = 0; i < 1000; ++i) {
    const int m = size(gen), n = size(gen);
    const Eigen::MatrixXd x = cluster(m, 0), y = cluster(n, 2 + 2 * unit(gen));  // 1..3 gaps apart
    Eigen::MatrixXd k(m, n);
    for (int a = 0; a < m; ++a)
      for (int b = 0; b < n; ++b) k(a, b) = std::exp(-(x.col(a) - y.col(b)).norm());
    blocks.emplace_back(k);
    dense.push_back(k);
    dense_bytes += sizeof(double) * m * n;
  }

  const double tol = 1e-6;
  const auto t0 = clock::now();
  const auto lr = hx::batched_ara(blocks, tol, {.max_rank = 64, .block_size = 32, .converge_samples = 10});
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();

  std::size_t lr_bytes = 0;
  int min_rank = 1 << 30, max_rank = 0, samples = 0;
  double worst = 0;
  for (int i = 0; i < lr.size(); ++i) {
    lr_bytes += sizeof(double) * (lr.U(i).rows() + lr.V(i).rows()) * lr.rank(i);
    min_rank = std::min(min_rank, lr.rank(i)), max_rank = std::max(max_rank, lr.rank(i));
    samples += lr.samples(i);
    const Eigen::MatrixXd U = hx::to_dense(lr.U(i)), V = hx::to_dense(lr.V(i));
    worst = std::max(worst, (dense[i] - U * V.transpose()).norm() / dense[i].norm());
  }
  std::printf("  %d blocks, tol %.0e: ranks %d..%d, %.1f random samples per block, %d rounds, %.3f s\n", lr.size(),
              tol, min_rank, max_rank, double(samples) / lr.size(), lr.rounds(), seconds);
  std::printf("  memory %.1f MB dense -> %.1f MB low rank; worst relative error %.2e; unconverged: %zu\n",
              dense_bytes / 1e6, lr_bytes / 1e6, worst, lr.unconverged().size());
  return worst <= tol && lr.unconverged().empty() ? 0 : 1;
}
