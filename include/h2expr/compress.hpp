#pragma once
// compress(A, tol): algebraic recompression of an H2 matrix to a relative threshold (relative to an
// estimate of ||A||_2), with a report of what it did. Same algorithm on every space.
#include <h2expr/detail/compress.hpp>
#include <h2expr/h2_matrix.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

namespace h2expr {

struct compress_report {
  std::size_t memory_before = 0, memory_after = 0;  // bytes of bases, coupling and dense blocks
  std::vector<int> ranks_before, ranks_after;       // stored rank per level
  std::vector<int> node_rank_min, node_rank_max;    // per level, over the nodes, after
  std::vector<double> node_rank_avg;
  double norm_estimate = 0;   // ||A||_2 before, by power iteration
  double error_estimate = 0;  // ||A_before - A_after||_2 / ||A_before||_2, by power iteration
  double seconds_orthogonalize = 0, seconds_weights = 0, seconds_truncation = 0, seconds_projection = 0;
};

template <class T, class Space>
compress_report compress(h2_matrix<T, Space>& A, double tol) {
  detail::require<invalid_tolerance>(std::isfinite(tol) && tol > 0 && tol < 1,
                                     "compress: the tolerance must be in (0, 1), got " + std::to_string(tol));
  auto& d = A.data();
  detail::require(d.row_basis != nullptr, "compress of an empty H2 matrix");
  compress_report rep;
  rep.memory_before = d.bytes();
  rep.ranks_before = d.rank;
  const h2_matrix<T, Space> before = A;  // for the error estimate
  rep.norm_estimate = detail::norm_estimate(d);

  // Every level truncates its own part of the operator: splitting the budget over the levels keeps the
  // total 2-norm error at about tol ||A||_2 rather than a multiple of it.
  const double eps = tol * rep.norm_estimate / std::sqrt(double(d.depth() + 1));
  detail::compress_phases ph;
  const auto node_ranks = detail::recompress(d, detail::keep_above{eps}, &ph);
  rep.seconds_orthogonalize = ph.orthogonalize, rep.seconds_weights = ph.weights;
  rep.seconds_truncation = ph.truncation, rep.seconds_projection = ph.projection;
  const int L = d.depth();
  rep.node_rank_min.assign(L + 1, 0), rep.node_rank_max.assign(L + 1, 0), rep.node_rank_avg.assign(L + 1, 0);
  for (int l = 0; l <= L; ++l) {
    const auto& all = node_ranks[l];
    int lo = all.empty() ? 0 : all[0], hi = 0;
    double sum = 0;
    for (int v : all) lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
    rep.node_rank_min[l] = lo, rep.node_rank_max[l] = hi, rep.node_rank_avg[l] = all.empty() ? 0 : sum / all.size();
  }
  rep.memory_after = d.bytes();
  rep.ranks_after = d.rank;

  // ||A_before - A_after||_2 by power iteration on the difference (the peer's error measure).
  auto x = matrix<T, Space>::random(A.cols(), 1, 777, d.ctx);
  double diff = 0;
  for (int it = 0; it < 15; ++it) {
    const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> xd = to_dense(x);
    const double xn = xd.template cast<double>().norm();
    if (xn == 0) break;
    x = matrix<T, Space>(xd / T(xn), d.ctx);
    const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> r = to_dense(before * x) - to_dense(A * x);
    diff = r.template cast<double>().norm();
    const matrix<T, Space> rv(r, d.ctx);
    x = matrix<T, Space>(to_dense(transpose(before) * rv) - to_dense(transpose(A) * rv), d.ctx);
  }
  rep.error_estimate = rep.norm_estimate > 0 ? diff / rep.norm_estimate : diff;
  return rep;
}

}  // namespace h2expr
