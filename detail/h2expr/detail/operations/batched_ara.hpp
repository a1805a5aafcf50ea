#pragma once
// batched_ara(M, tol, options): adaptive randomized approximation of a batch of small operators of
// different sizes, M_i ~= U_i V_i^T with U_i orthonormal, from products with blocks of vectors alone
// (section 2 of the HARA paper). The tolerance is relative per item, in the Frobenius norm:
// ||M_i - U_i V_i^T||_F <~ tol ||M_i||_F. Same algorithm on every space.
//
//   auto lr = batched_ara(blocks, 1e-6, {.max_rank = 64, .block_size = 32});
//   lr.rank(i), lr.U(i), lr.V(i), lr.converged(i)
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/primitives/block_batch.hpp>
#include <h2expr/detail/randomized/ara.hpp>
#include <h2expr/detail/randomized/batched_sampler.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace h2expr {

// Members in this order, so designated initializers work in any subset.
struct ara_options {
  int max_rank = 0;                        // per item; 0: no cap but the item's size. The basis of item i
                                           // takes rows_i x (cap + max(block_size, r)) of workspace
  int block_size = 32;                     // samples per round and item, 1..64
  int converge_samples = 10;               // r: consecutive small samples that end an item
  std::uint64_t seed = 0x2545f4914f6cdd1dull;
  bool sharpen = true;                     // final SVD of the small core: the least rank meeting tol
  bool throw_on_rank_cap = false;          // rank_cap_reached when an item stops at max_rank unconverged
};

inline void validate(const ara_options& o) {
  detail::require(o.max_rank >= 0, "ara_options: max_rank must be >= 0 (got " + std::to_string(o.max_rank) + ")");
  detail::require(o.block_size >= 1 && o.block_size <= 64,
                  "ara_options: block_size must be in 1..64 (got " + std::to_string(o.block_size) + ")");
  detail::require(o.converge_samples >= 1,
                  "ara_options: converge_samples must be >= 1 (got " + std::to_string(o.converge_samples) + ")");
}

// The result: item i is approximated by U(i) V(i)^T, U(i) rows_i x rank(i) with orthonormal columns.
template <class T, class Space = host>
class low_rank_batch {
 public:
  int size() const { return int(samples_.size()); }
  int rank(int i) const { return U_.cols(i); }
  const_view<T, Space> U(int i) const { return U_.item(i); }
  const_view<T, Space> V(int i) const { return V_.item(i); }
  bool converged(int i) const { return converged_[std::size_t(i)] != 0; }  // false: stopped at max_rank
  int samples(int i) const { return samples_[std::size_t(i)]; }             // random samples taken
  int rounds() const { return rounds_; }                                     // sampling rounds of the batch
  std::vector<int> unconverged() const {
    std::vector<int> out;
    for (int i = 0; i < size(); ++i)
      if (!converged(i)) out.push_back(i);
    return out;
  }

 private:
  template <class T2, class S2>
  friend low_rank_batch<T2, S2> batched_ara(const batched_sampler<T2, S2>&, double, const ara_options&);
  detail::block_batch<T, Space> U_, V_;
  std::vector<int> samples_;
  std::vector<char> converged_;
  int rounds_ = 0;
};

template <class T, class Space>
low_rank_batch<T, Space> batched_ara(const batched_sampler<T, Space>& M, double tol, const ara_options& o = {}) {
  detail::require<invalid_tolerance>(std::isfinite(tol) && tol > 0 && tol < 1,
                                     "batched_ara: the tolerance must be in (0, 1), got " + std::to_string(tol));
  validate(o);
  const auto& ctx = M.context_ptr();
  auto& c = *ctx;
  const int count = M.size(), bs = o.block_size, r = o.converge_samples;
  std::vector<int> rows(count), cols(count), full(count), limit(count);
  std::vector<std::size_t> omega_offset(count);
  std::size_t omega_size = 0;
  for (int i = 0; i < count; ++i) {
    rows[i] = M.rows(i), cols[i] = M.cols(i), full[i] = std::min(rows[i], cols[i]);
    // Room for r columns past max_rank: sharpening may still bring such a basis under the cap.
    limit[i] = o.max_rank > 0 ? std::min(full[i], o.max_rank + r) : full[i];
    omega_offset[i] = omega_size;
    omega_size += std::size_t(cols[i]) * std::size_t(bs);
  }

  // Range: Q_i with the samples' span, round by round.
  detail::range_finder<T, Space> rf(ctx, rows, full, limit, {tol, bs, r});
  detail::buffer<T, Space> omega(ctx, omega_size);
  rf.run(
      [&](const detail::ara_round<T>& round) {
        const int n = int(round.items.size());
        std::vector<int> in_rows(n), in_ld(n);
        std::vector<const T*> in(n);
        detail::batch<T, Space> draws(ctx);
        for (int p = 0; p < n; ++p) {
          const int i = round.items[std::size_t(p)];
          in_rows[p] = cols[i], in_ld[p] = std::max(cols[i], 1), in[p] = omega.data() + omega_offset[i];
          draws.add(omega.data() + omega_offset[i], in_rows[p], round.samples[std::size_t(p)], in_ld[p]);
        }
        detail::fill_random(detail::distribution::normal, draws, round.seed);
        M.apply(sample_batch<T, Space>(ctx, false, round.items, in_rows, round.rows, round.samples, in, in_ld,
                                       round.outputs, round.ld));
      },
      o.seed);

  // An item whose basis reached its full size min(rows, cols) is represented exactly instead: its last
  // columns came from residuals near T's rounding level, which need not span what was left (seen in
  // float at tol 1e-4). rows <= cols: Q = I; rows > cols: Q = orth(M I), by Householder QR. One upload
  // of identities and one batched call per group, however many items there are.
  {
    std::vector<int> id_items, id_n, id_ld, qr_items, qr_m, qr_n, qr_ld;
    std::vector<std::size_t> id_offset, qr_offset;
    std::size_t eye_size = 0;
    for (int i = 0; i < count; ++i) {
      if (full[i] == 0 || rf.state(i).columns < full[i]) continue;
      const int k = full[i];  // the identity's size: rows (Q itself) or cols (M's input)
      if (rows[i] <= cols[i]) id_items.push_back(i), id_n.push_back(k), id_ld.push_back(rf.ld(i)), id_offset.push_back(eye_size);
      else
        qr_items.push_back(i), qr_m.push_back(rows[i]), qr_n.push_back(k), qr_ld.push_back(rf.ld(i)),
            qr_offset.push_back(eye_size);
      eye_size += std::size_t(k) * std::size_t(k);
    }
    if (eye_size > 0) {
      std::vector<T> eyes(eye_size, T(0));
      for (int i = 0, o = 0; i < count; ++i) {
        if (full[i] == 0 || rf.state(i).columns < full[i]) continue;
        for (int j = 0; j < full[i]; ++j) eyes[std::size_t(o) + std::size_t(j) * (full[i] + 1)] = T(1);
        o += full[i] * full[i];
      }
      detail::buffer<T, Space> eyes_d(ctx, eyes);
      auto eye = [&](std::size_t offset) { return eyes_d.data() + offset; };
      if (!id_items.empty()) {  // Q = I I: the identity, written by one batched product (exact)
        detail::batch<const T, Space> e(ctx);
        detail::batch<T, Space> q(ctx);
        for (std::size_t p = 0; p < id_items.size(); ++p)
          e.add(eye(id_offset[p]), id_n[p], id_n[p], id_n[p]), q.add(rf.basis(id_items[p]), id_n[p], id_n[p], id_ld[p]);
        detail::gemm(detail::op::none, detail::op::none, T(1), e, e, T(0), q);
      }
      if (!qr_items.empty()) {  // Q = M I, then its Householder Q in place
        const int n = int(qr_items.size());
        std::vector<const T*> in(n);
        std::vector<T*> out(n);
        detail::batch<T, Space> q(ctx);
        for (int p = 0; p < n; ++p) {
          in[p] = eye(qr_offset[p]), out[p] = rf.basis(qr_items[p]);
          q.add(out[p], qr_m[p], qr_n[p], qr_ld[p]);
        }
        M.apply(sample_batch<T, Space>(ctx, false, qr_items, qr_n, qr_m, qr_n, in, qr_n, out, qr_ld));
        detail::qr(q);
      }
    }
  }

  // Projection: Vt_i = M_i^T Q_i (cols_i x k_i), k_i the columns that enter the result.
  std::vector<int> items, k_of, m_of, n_of, ldq, ldv;
  std::vector<T*> q_ptr, v_ptr;
  std::vector<std::size_t> v_offset;
  std::size_t v_size = 0;
  for (int i = 0; i < count; ++i) {
    const int k = rf.state(i).columns;
    if (k == 0) continue;
    items.push_back(i), k_of.push_back(k), m_of.push_back(rows[i]), n_of.push_back(cols[i]);
    ldq.push_back(rf.ld(i)), ldv.push_back(std::max(cols[i], 1)), q_ptr.push_back(rf.basis(i));
    v_offset.push_back(v_size);
    v_size += std::size_t(cols[i]) * std::size_t(k);
  }
  const int np = int(items.size());
  detail::buffer<T, Space> Vt(ctx, v_size);
  for (int p = 0; p < np; ++p) v_ptr.push_back(Vt.data() + v_offset[std::size_t(p)]);
  if (np > 0)
    M.apply_transpose(sample_batch<T, Space>(ctx, true, items, m_of, n_of, k_of,
                                             std::vector<const T*>(q_ptr.begin(), q_ptr.end()), ldq, v_ptr, ldv));

  // Final ranks f_i and the k_i x f_i matrices that mix Q's columns into U and Vt's into V:
  // sharpened, U = Q Z(:, 1:f) and V = W(:, 1:f) diag(S) from the SVD Vt = W S Z^T, keeping the least
  // f whose discarded singular values stay within 0.9 tol of the core's norm; otherwise U = Q P and
  // V = Vt P with P the first f columns of the identity (f = k unless max_rank cuts it).
  std::vector<int> f(count, 0);
  std::vector<char> capped(count, 0);
  std::vector<std::size_t> k2_offset(np);
  std::size_t k2_size = 0, s_size = 0;
  for (int p = 0; p < np; ++p) {
    k2_offset[p] = k2_size;
    k2_size += std::size_t(k_of[p]) * std::size_t(k_of[p]);
    s_size += std::size_t(k_of[p]);
  }
  detail::buffer<T, Space> Z(ctx, o.sharpen ? k2_size : 0), S(ctx, o.sharpen ? s_size : 0);
  std::vector<T> mix(k2_size, T(0));  // host-built k x f blocks (diag(S) or a selection), ld k
  std::vector<T> s_host;
  if (o.sharpen && np > 0) {
    detail::batch<T, Space> vt(ctx), sv(ctx), z(ctx);
    for (int p = 0, so = 0; p < np; so += k_of[p], ++p) {
      vt.add(v_ptr[p], n_of[p], k_of[p], ldv[p]), sv.add(S.data() + so, k_of[p], 1, k_of[p]);
      z.add(Z.data() + k2_offset[p], k_of[p], k_of[p], k_of[p]);
    }
    detail::svd(vt, sv, &z);
    s_host = S.to_host();
  }
  std::size_t so = 0;
  for (int p = 0; p < np; ++p) {
    const int i = items[p], k = k_of[p];
    int keep = 0;
    T* block = mix.data() + k2_offset[p];
    if (o.sharpen) {
      const T* sv = s_host.data() + so;
      so += std::size_t(k);
      double total = 0, tail = 0;
      for (int l = 0; l < k; ++l) total += double(sv[l]) * double(sv[l]);
      const double budget = 0.81 * tol * tol * total;
      keep = k;
      while (keep > 0 && tail + double(sv[keep - 1]) * double(sv[keep - 1]) <= budget)
        tail += double(sv[keep - 1]) * double(sv[keep - 1]), --keep;
      if (o.max_rank > 0 && keep > o.max_rank) capped[i] = 1, keep = o.max_rank;
      for (int l = 0; l < keep; ++l) block[l + std::size_t(l) * k] = sv[l];
    } else {
      keep = k;
      if (o.max_rank > 0 && keep > o.max_rank) capped[i] = 1, keep = o.max_rank;
      for (int l = 0; l < keep; ++l) block[l + std::size_t(l) * k] = T(1);
    }
    f[i] = keep;
  }

  low_rank_batch<T, Space> out;
  out.U_ = detail::block_batch<T, Space>(ctx, rows, f);
  out.V_ = detail::block_batch<T, Space>(ctx, cols, f);
  if (np > 0) {
    detail::buffer<T, Space> mix_d(ctx, mix);
    detail::batch<const T, Space> q(ctx), vt(ctx), zmix(ctx), m(ctx);
    detail::batch<T, Space> u(ctx), v(ctx);
    for (int p = 0; p < np; ++p) {
      const int i = items[p], k = k_of[p];
      q.add(q_ptr[p], m_of[p], k, ldq[p]), vt.add(v_ptr[p], n_of[p], k, ldv[p]);
      m.add(mix_d.data() + k2_offset[p], k, f[i], k);
      zmix.add(o.sharpen ? Z.data() + k2_offset[p] : mix_d.data() + k2_offset[p], k, f[i], k);
      u.add(out.U_.item(i).data(), m_of[p], f[i], std::max(rows[i], 1));
      v.add(out.V_.item(i).data(), n_of[p], f[i], ldv[p]);
    }
    detail::gemm(detail::op::none, detail::op::none, T(1), q, zmix, T(0), u);
    detail::gemm(detail::op::none, detail::op::none, T(1), vt, m, T(0), v);
  }
  out.samples_.resize(count), out.converged_.resize(count);
  std::vector<int> failed;
  for (int i = 0; i < count; ++i) {
    const auto& s = rf.state(i);
    out.samples_[i] = s.samples;
    out.converged_[i] = s.converged && !capped[i];
    if (!out.converged_[i]) failed.push_back(i);
  }
  out.rounds_ = rf.rounds();
  if (o.throw_on_rank_cap && !failed.empty()) {
    std::string list;
    for (std::size_t j = 0; j < std::min<std::size_t>(failed.size(), 8); ++j)
      list += (j ? ", " : "") + std::to_string(failed[j]);
    if (failed.size() > 8) list += ", ...";
    throw rank_cap_reached("h2expr: batched_ara: " + std::to_string(failed.size()) + " of " + std::to_string(count) +
                           " items reached max_rank = " + std::to_string(o.max_rank) + " before tol = " +
                           std::to_string(tol) + " (items " + list + ")");
  }
  return out;
}

// A batch of explicit blocks (sizes may differ), sampled by batched gemm.
template <class T, class Space>
low_rank_batch<T, Space> batched_ara(const std::vector<matrix<T, Space>>& blocks, double tol,
                                     const ara_options& o = {}) {
  auto ctx = blocks.empty() ? default_context<Space>() : blocks.front().context_ptr();
  std::vector<index> rows, cols;
  for (const auto& b : blocks) rows.push_back(b.rows()), cols.push_back(b.cols());
  auto product = [&blocks](const sample_batch<T, Space>& b) {
    detail::batch<const T, Space> a(blocks.front().context_ptr());
    a.reserve(b.count());
    for (int p = 0; p < b.count(); ++p) {
      const auto& m = blocks[std::size_t(b.item(p))];
      a.add(m.data(), int(m.rows()), int(m.cols()), int(std::max<index>(m.rows(), 1)));
    }
    detail::gemm(b.transposed() ? detail::op::transpose : detail::op::none, detail::op::none, T(1), a,
                 detail::sample_batch_access::inputs(b), T(0), detail::sample_batch_access::outputs(b));
  };
  return batched_ara(batched_sampler<T, Space>(rows, cols, product, product, ctx), tol, o);
}

}  // namespace h2expr
