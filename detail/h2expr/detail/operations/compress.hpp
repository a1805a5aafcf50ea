#pragma once
// compress(A, tol[, options]): algebraic recompression of an H2 matrix to a relative threshold
// (relative to an estimate of ||A||_2), with a report of what it did. Same algorithm on every space; the
// result keeps a rank per node, stored without padding.
//
//   hx::orthogonalize(A);                                   // optional: compress does it otherwise
//   auto rep = hx::compress(A, 1e-4);
//   auto checked = hx::compress(B, 1e-4, {.estimate_error = true});  // *checked.error_estimate
#include <h2expr/detail/h2/compact.hpp>
#include <h2expr/detail/h2/compress.hpp>
#include <h2expr/detail/h2/h2_matrix.hpp>

#include <chrono>
#include <cstdint>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace h2expr {

struct compress_report {
  std::size_t memory_before = 0, memory_after = 0;  // bytes of bases, coupling and dense blocks
  std::vector<int> ranks_before, ranks_after;       // largest node rank per level
  std::vector<int> node_rank_min, node_rank_max;    // per level, over the nodes of both bases, after
  std::vector<double> node_rank_avg;
  // ||A||_2 before, by block Krylov on blocks of 4 vectors, to about 0.3% (a low value only tightens the
  // threshold): at most 6 products with A and 6 with A^T, or 12 with a symmetric A.
  double norm_estimate = 0;
  // ||A_before - A_after||_2 / ||A_before||_2 by block Krylov on the difference (at most 4), run while both
  // representations exist (no copy of A is kept); only with compress_options::estimate_error.
  std::optional<double> error_estimate;
  bool orthogonalized = false;  // whether compress orthogonalized the bases (not after orthogonalize())
  double seconds_orthogonalize = 0, seconds_weights = 0, seconds_truncation = 0, seconds_projection = 0;
  // Nominal operations per phase (gemm 2mnk, Householder QR, the weights' singular pairs: 10n^3 on the
  // host, 22n^3 per SVD on the GPU), for GFLOP/s.
  double flops_orthogonalize = 0, flops_weights = 0, flops_truncation = 0, flops_projection = 0;
  // A distributed matrix's compress: this rank's point-to-point traffic and its share of the allgathers
  // (zero in one process).
  std::int64_t bytes_sent = 0, messages_sent = 0, allgather_bytes = 0;
  double seconds() const { return seconds_orthogonalize + seconds_weights + seconds_truncation + seconds_projection; }
  double flops() const { return flops_orthogonalize + flops_weights + flops_truncation + flops_projection; }
};

struct compress_options {
  // Measure the error made (report.error_estimate): up to 8 pairs of products with the difference of
  // the two representations. Off by default, as the peer's is; the threshold bounds the error.
  bool estimate_error = false;
  // Also written here when given, as hara_options::report and inverse_options::report are: every
  // builder takes `.report = &r` (compress returns the report as well).
  compress_report* report = nullptr;
};

// Truncates every node of both bases to the rank that keeps the singular values of its weights above
// tol ||A||_2 / (2 sqrt(depth + 1)), and stores it at that rank (per node, without padding). Bases
// that orthogonalize() has made orthonormal are not orthogonalized again. Bad input: tol outside (0, 1)
// or NaN (invalid_tolerance). Compressing a compressed matrix again does not grow it.
template <class T, class Space>
compress_report compress(h2_matrix<T, Space>& A, double tol, const compress_options& options = {}) {
  detail::require<invalid_tolerance>(std::isfinite(tol) && tol > 0 && tol < 1,
                                     "compress: the tolerance must be in (0, 1), got " + std::to_string(tol));
  auto& d = detail::h2_access::data(A);
  detail::require(d.row_basis != nullptr, "compress of an empty H2 matrix");
  compress_report rep;
  rep.orthogonalized = !d.row_basis->orthonormal || !d.col_basis->orthonormal;
  rep.memory_before = d.bytes();
  rep.ranks_before = d.rank;
  rep.norm_estimate = detail::norm_estimate(d);
  // Every level truncates its own part of the operator, on the row and on the column side: a quarter
  // of tol^2 ||A||_2^2 per level and side keeps the total 2-norm error under tol ||A||_2 (measured on
  // TARGETS.md's problems at 1e-4: 2D 6.7e-5, 3D 7.1e-5; half the budget gave 1.2e-4 in 3D).
  const double eps = tol * rep.norm_estimate / (2 * std::sqrt(double(d.depth() + 1)));
  detail::compress_phases ph;
  double diff = 0;
  detail::kept_ranks kept;
  std::chrono::steady_clock::time_point stored;
  detail::on_uniform_layout(d, [&](detail::h2_data<T, Space>& u, detail::kept_ranks* own) {
    kept = detail::recompress(u, detail::keep_above{eps, rep.norm_estimate}, &ph, options.estimate_error ? &diff : nullptr, own);
    stored = std::chrono::steady_clock::now();
    return kept;
  });
  ph.projection += std::chrono::duration<double>(std::chrono::steady_clock::now() - stored).count();  // storing it
  rep.seconds_orthogonalize = ph.orthogonalize, rep.seconds_weights = ph.weights;
  rep.seconds_truncation = ph.truncation, rep.seconds_projection = ph.projection;
  rep.flops_orthogonalize = ph.flops_orthogonalize, rep.flops_weights = ph.flops_weights;
  rep.flops_truncation = ph.flops_truncation, rep.flops_projection = ph.flops_projection;
  const int L = d.depth();
  rep.node_rank_min.assign(L + 1, 0), rep.node_rank_max.assign(L + 1, 0), rep.node_rank_avg.assign(L + 1, 0);
  for (int l = 0; l <= L; ++l) {
    std::vector<int> all = kept.rows[l];
    if (d.row_basis != d.col_basis) all.insert(all.end(), kept.cols[l].begin(), kept.cols[l].end());
    int lo = all.empty() ? 0 : all[0], hi = 0;
    double sum = 0;
    for (int v : all) lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
    rep.node_rank_min[l] = lo, rep.node_rank_max[l] = hi, rep.node_rank_avg[l] = all.empty() ? 0 : sum / all.size();
  }
  rep.memory_after = d.bytes();
  rep.ranks_after = d.rank;

  if (options.estimate_error) rep.error_estimate = rep.norm_estimate > 0 ? diff / rep.norm_estimate : diff;
  if (options.report) *options.report = rep;
  return rep;
}

}  // namespace h2expr
