#pragma once
// Algebraic compression of H2 matrices (section 5 of the H2 GPU paper), written once for every space:
//   1. orthogonalize the bases (orthogonalize.hpp);
//   2. basis generation, a downsweep of batched QR: the weight Z_t of node t (Z_t Z_t^T = the Gram
//      matrix of everything U_t carries) is the R factor of [Z_parent^T E_t^T; S_ts1^T; S_ts2^T; ...];
//   3. truncation: P_t = the leading left singular vectors of Z_t, kept while sigma > tol ||A||_2;
//      new leaves U_t P_t, new transfers P_c^T E_c P_p;
//   4. projection of the coupling matrices, P_t^T S_ts P_s (transform_coupling).
// Ranks stay uniform per level (the largest node rank; smaller nodes get zero columns).
#include <h2expr/detail/hgemv.hpp>
#include <h2expr/detail/orthogonalize.hpp>
#include <h2expr/matrix.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
buffer<T, Space> identity_buffer(const context_ptr<Space>& ctx, int k) {
  std::vector<T> id(std::size_t(k) * k, T(0));
  for (int i = 0; i < k; ++i) id[std::size_t(i) * k + i] = T(1);
  return buffer<T, Space>(ctx, id);
}

// Weights of a basis, per level: R_t with Z_t = R_t^T (rank x rank per node). A row basis carries the
// blocks of row t (S_ts^T in the stack), a column basis those of column t (S_st); a basis shared by
// rows and columns carries both, so it stays valid for a non-symmetric operator.
template <class T, class Space>
std::vector<buffer<T, Space>> basis_weights(h2_data<T, Space>& A, const basis_tree<T, Space>& B, bool rows, bool cols) {
  const auto& ctx = A.ctx;
  const auto& blocks = A.structure.blocks();
  const int L = A.depth();
  std::vector<buffer<T, Space>> R(L + 1);
  for (int l = 0; l <= L; ++l) {
    const int k = A.rank[l], kp = l > 0 ? A.rank[l - 1] : 0, nodes = 1 << l;
    R[l] = buffer<T, Space>(ctx, std::size_t(nodes) * k * k);
    if (k == 0) continue;
    const auto& lv = blocks.coupling[l];
    auto entries = [&](int t) { return (rows ? lv.row_ptr[t + 1] - lv.row_ptr[t] : 0) + (cols ? lv.col_ptr[t + 1] - lv.col_ptr[t] : 0); };
    std::vector<int> height(nodes);
    int H = 1;
    for (int t = 0; t < nodes; ++t) H = std::max(H, height[t] = kp + entries(t) * k);
    buffer<T, Space> W(ctx, std::size_t(nodes) * H * k);
    fill(*ctx, W.data(), W.size(), T(0));
    // Below the parent part: S_ts^T for the blocks of row t, then S_st for those of column t.
    std::vector<std::int64_t> s_row, w_row, s_col, w_col;
    for (int t = 0; t < nodes; ++t) {
      std::int64_t row = std::int64_t(t) * H * k + kp;
      if (rows)
        for (int e = lv.row_ptr[t]; e < lv.row_ptr[t + 1]; ++e, row += k)
          s_row.push_back(std::int64_t(e) * k * k), w_row.push_back(row);
      if (cols)
        for (int e = lv.col_ptr[t]; e < lv.col_ptr[t + 1]; ++e, row += k)
          s_col.push_back(std::int64_t(lv.block_of[e]) * k * k), w_col.push_back(row);
    }
    auto I = identity_buffer<T, Space>(ctx, k);
    for (int pass = 0; pass < 2; ++pass) {
      const auto& so = pass == 0 ? s_row : s_col;
      const auto& wo = pass == 0 ? w_row : w_col;
      if (so.empty()) continue;
      auto ps = pointers(ctx, A.coupling[l].data(), so), pw = pointers(ctx, W.data(), wo);
      auto pi = pointers(ctx, I.data(), std::vector<std::int64_t>(so.size(), 0));
      gemm_batched(*ctx, pass == 0 ? op::transpose : op::none, op::none, k, k, k, T(1), (const T* const*)ps.data(), k,
                   (const T* const*)pi.data(), k, T(0), pw.data(), H, int(so.size()));
      ctx->synchronize();
    }
    // Parent part: Z_p^T E_t^T = R_p E_t^T, for child h of every parent.
    if (kp > 0)
      for (int h = 0; h < 2; ++h)
        gemm_strided_batched(*ctx, op::none, op::transpose, kp, k, kp, T(1), R[l - 1].data(), kp,
                             std::int64_t(kp) * kp, B.transfers[l].data() + h * k, 2 * k, std::int64_t(2) * k * kp, T(0),
                             W.data() + std::int64_t(h) * H * k, H, std::int64_t(2) * H * k, nodes / 2);
    std::vector<int> m(nodes);
    for (int t = 0; t < nodes; ++t) m[t] = std::max(height[t], 1);  // an empty node: one zero row, R = 0
    qr_items<T, Space>(ctx, W.data(), std::int64_t(H) * k, H, m, k, R[l].data(), /*form_q=*/false);
    ctx->synchronize();
  }
  return R;
}

// Truncation bases per level: P_t (rank x new rank, zero columns past the node's own rank) from the
// SVD of the weights; `choose(l, sigma, k)` picks the node ranks of level l from the singular values
// (k per node, descending, nodes one after another); returns them through `node_ranks`.
template <class T, class Space, class Choose>
std::vector<buffer<T, Space>> truncation_bases(h2_data<T, Space>& A, std::vector<buffer<T, Space>>& R, Choose&& choose,
                                               std::vector<std::vector<int>>& node_ranks) {
  const auto& ctx = A.ctx;
  const int L = A.depth();
  std::vector<buffer<T, Space>> P(L + 1);
  node_ranks.assign(L + 1, {});
  for (int l = 0; l <= L; ++l) {
    const int k = A.rank[l], nodes = 1 << l;
    P[l] = buffer<T, Space>(ctx, std::size_t(nodes) * k * k);
    node_ranks[l].assign(nodes, 0);
    if (k == 0) continue;
    buffer<T, Space> S(ctx, std::size_t(nodes) * k);
    buffer<int, Space> M(ctx, std::vector<int>(nodes, k)), LD(ctx, std::vector<int>(nodes, k));
    buffer<T*, Space> pa(ctx, std::size_t(nodes)), ps(ctx, std::size_t(nodes)), pv(ctx, std::size_t(nodes));
    marshal_strided(*ctx, R[l].data(), std::int64_t(k) * k, nodes, pa.data());
    marshal_strided(*ctx, S.data(), std::int64_t(k), nodes, ps.data());
    marshal_strided(*ctx, P[l].data(), std::int64_t(k) * k, nodes, pv.data());
    // R_t = U S V^T, so Z_t = R_t^T = V S U^T: its left singular vectors are V.
    svd_vbatched(*ctx, M.data(), M.data(), pa.data(), LD.data(), ps.data(), pv.data(), LD.data(), nodes, k, k);
    node_ranks[l] = choose(l, S.to_host(), k);
    zero_trailing_columns<T, Space>(ctx, P[l].data(), std::int64_t(k) * k, k, k, k, node_ranks[l]);
  }
  return P;
}

// Node ranks that keep every singular value above eps (an absolute 2-norm threshold).
struct keep_above {
  double eps;
  template <class T>
  std::vector<int> operator()(int, const std::vector<T>& sigma, int k) const {
    std::vector<int> r(sigma.size() / std::size_t(std::max(k, 1)), 0);
    for (std::size_t t = 0; t < r.size(); ++t)
      while (r[t] < k && double(sigma[t * k + r[t]]) > eps) ++r[t];
    return r;
  }
};

// The new basis tree: leaves U_t P_t, transfers P_c^T E_c P_p, with ranks r (per level).
template <class T, class Space>
basis_tree<T, Space> truncated_basis(h2_data<T, Space>& A, const basis_tree<T, Space>& B,
                                     const std::vector<buffer<T, Space>>& P, const std::vector<int>& r) {
  const auto& ctx = A.ctx;
  const int L = A.depth(), m = A.m_max, leaves = 1 << L;
  basis_tree<T, Space> N;
  N.leaves = buffer<T, Space>(ctx, std::size_t(leaves) * m * r[L]);
  if (r[L] > 0)
    gemm_strided_batched(*ctx, op::none, op::none, m, r[L], A.rank[L], T(1), B.leaves.data(), m,
                         std::int64_t(m) * A.rank[L], P[L].data(), A.rank[L], std::int64_t(A.rank[L]) * A.rank[L], T(0),
                         N.leaves.data(), m, std::int64_t(m) * r[L], leaves);
  N.transfers.resize(L + 1);
  for (int l = 1; l <= L; ++l) {
    const int k = A.rank[l], kp = A.rank[l - 1], rc = r[l], rp = r[l - 1], parents = 1 << (l - 1);
    N.transfers[l] = buffer<T, Space>(ctx, std::size_t(parents) * 2 * rc * rp);
    if (rc == 0 || rp == 0) continue;
    buffer<T, Space> tmp(ctx, std::size_t(parents) * 2 * k * rp);
    for (int h = 0; h < 2; ++h) {
      gemm_strided_batched(*ctx, op::none, op::none, k, rp, kp, T(1), B.transfers[l].data() + h * k, 2 * k,
                           std::int64_t(2) * k * kp, P[l - 1].data(), kp, std::int64_t(kp) * kp, T(0),
                           tmp.data() + h * k, 2 * k, std::int64_t(2) * k * rp, parents);
      gemm_strided_batched(*ctx, op::transpose, op::none, rc, rp, k, T(1), P[l].data() + std::int64_t(h) * k * k, k,
                           std::int64_t(2) * k * k, tmp.data() + h * k, 2 * k, std::int64_t(2) * k * rp, T(0),
                           N.transfers[l].data() + h * rc, 2 * rc, std::int64_t(2) * rc * rp, parents);
    }
    ctx->synchronize();
  }
  return N;
}

// ||A||_2 by power iteration on A^T A (HGEMV and its transpose).
template <class T, class Space>
double norm_estimate(const h2_data<T, Space>& A, int iterations = 20) {
  const index n = A.structure.cols();
  auto x = matrix<T, Space>::random(n, 1, 12345, A.ctx);
  auto y = matrix<T, Space>::uninitialized(A.structure.rows(), 1, A.ctx);
  double sigma = 0;
  for (int it = 0; it < iterations; ++it) {
    const double xn = to_dense(x).template cast<double>().norm();
    if (xn == 0) return 0;
    x = matrix<T, Space>(to_dense(x) / T(xn), A.ctx);
    hgemv(A, op::none, const_view<T, Space>(x.view()), y.view());
    sigma = to_dense(y).template cast<double>().norm();
    hgemv(A, op::transpose, const_view<T, Space>(y.view()), x.view());
  }
  return sigma;
}

// Seconds per phase of a recompression.
struct compress_phases {
  double orthogonalize = 0, weights = 0, truncation = 0, projection = 0;
};

// Steps 1-4 in place; `choose` picks the node ranks from the weights' singular values (see
// truncation_bases). Returns the node ranks per level (rows, then columns for separate bases); ranks
// become uniform per level at the largest node rank.
template <class T, class Space, class Choose>
std::vector<std::vector<int>> recompress(h2_data<T, Space>& d, Choose&& choose, compress_phases* phases = nullptr) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto lap = [&](double compress_phases::*slot) {
    d.ctx->synchronize();
    const auto now = clock::now();
    if (phases) phases->*slot += std::chrono::duration<double>(now - t0).count();
    t0 = now;
  };
  orthogonalize(d);
  lap(&compress_phases::orthogonalize);

  const bool shared = d.row_basis == d.col_basis;
  auto Zr = basis_weights(d, *d.row_basis, true, shared);
  std::vector<buffer<T, Space>> Zc;
  if (!shared) Zc = basis_weights(d, *d.col_basis, false, true);
  lap(&compress_phases::weights);

  std::vector<std::vector<int>> nr, nc;
  auto Pr = truncation_bases(d, Zr, choose, nr);
  std::vector<buffer<T, Space>> Pc;
  if (!shared) Pc = truncation_bases(d, Zc, choose, nc);
  const int L = d.depth();
  std::vector<int> r(L + 1, 0);
  for (int l = 0; l <= L; ++l) {
    if (!shared) nr[l].insert(nr[l].end(), nc[l].begin(), nc[l].end());
    for (int v : nr[l]) r[l] = std::max(r[l], v);
  }
  auto row = std::make_shared<basis_tree<T, Space>>(truncated_basis(d, *d.row_basis, Pr, r));
  auto col = shared ? row : std::make_shared<basis_tree<T, Space>>(truncated_basis(d, *d.col_basis, Pc, r));
  lap(&compress_phases::truncation);

  transform_coupling(d, Pr, op::transpose, shared ? Pr : Pc, op::none, r);
  d.row_basis = row, d.col_basis = col, d.rank = r;
  lap(&compress_phases::projection);
  return nr;
}

}  // namespace h2expr::detail
