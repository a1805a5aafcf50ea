#pragma once
// HARA on weak (HSS-like) structures from one set of samples. When every block of the structure is a
// sibling block (t, t^1) of its level and the dense leaves are the diagonal, a node's near field is
// the node itself, and one Gaussian block Omega of s columns, Y = M Omega (with Psi, Z = M^T Psi for a
// general operator), serves every level (Levitt and Martinsson, "Linear-complexity black-box randomized
// compression of rank-structured matrices", SISC 2024): samples no longer add up level by level, and
// s is about the leaf size plus the ranks, independent of n. From the leaves up, for each node t with
// (Omega_t, Y_t) its rows of the samples (a leaf's rows; above, its children's compressed samples):
//   1. Q = orth(Omega_t^T) (s x n_t). Y_t (I - Q Q^T) = M(t, rest) Omega(rest) (I - Q Q^T) samples the
//      node's off-diagonal block row with s - n_t Gaussian columns and never sees M(t, t): U_t is its
//      leading left singular vectors, truncated in the Frobenius norm; V_t likewise from (Psi, Z).
//   2. G = Y_t Omega_t^+ = M(t, t) + M(t, rest) Omega(rest) Omega_t^+, whose leak lies in range(U_t)
//      (H = Z_t Psi_t^+ leaks into range(V_t)), so D_t = (I - U U^T) G + U U^T ((I - V V^T) H)^T is
//      M(t, t) - U U^T M(t, t) V V^T up to the truncation.
//   3. Omega^_t = V^T Omega_t, Y^_t = U^T (Y_t - D_t Omega_t), Psi^_t = U^T Psi_t, Z^_t = V^T (Z_t -
//      D_t^T Psi_t): samples of the compressed matrix U^T M V, which the parent stacks. At the root,
//      D = Y Omega^+.
// Then top-down the compressed diagonal blocks C give the H2 blocks: for the children a, b of t, with
// E, F their rows of U_t, V_t: S_ab = D_t(a, b) + E_a C_t F_b^T and C_a = D_t(a, a) + E_a C_t F_a^T; a
// dense leaf is D + U C V^T. The bases come out orthonormal and nested, each node at its own rank.
// Every node needs s >= n_t + k_t + p (p = converge_samples): s starts at the leaf size + p +
// block_size / 2 and grows by block_size (or to what a node showed it needs), sampling only the new
// columns, until that holds everywhere.
#include <h2expr/detail/hara.hpp>

#include <numeric>
#include <optional>

namespace h2expr::detail {

// Whether every coupling block is the sibling block (t, t^1) of its level and the dense leaves are
// the diagonal: the structures hara builds from one set of samples.
inline bool weak_blocks(const matrix_tree& mt) {
  const int L = mt.depth();
  if (L < 1 || mt.coupling[0].blocks() != 0) return false;
  for (int l = 1; l <= L; ++l) {
    const auto& lv = mt.coupling[l];
    for (int t = 0; t < lv.level_size(); ++t)
      if (lv.row_ptr[t + 1] - lv.row_ptr[t] != 1 || lv.col[lv.row_ptr[t]] != (t ^ 1)) return false;
  }
  const auto& dn = mt.dense;
  for (int a = 0; a < dn.level_size(); ++a)
    if (dn.row_ptr[a + 1] - dn.row_ptr[a] != 1 || dn.col[dn.row_ptr[a]] != a) return false;
  return true;
}

template <class T, class Space>
class weak_hara_builder {
 public:
  weak_hara_builder(const sampler<T, Space>& M, const ::h2expr::structure<T>& S, hara_parameters p)
      : M_(M), ctx_(M.context_ptr()), S_(S), p_(p), sym_(M.symmetric()), H_(zero_h2<T, Space>(ctx_, S, sym_)) {
    const auto& tree = S.row_tree();
    L_ = S.depth(), n_ = S.rows(), m_ = std::max(tree.max_leaf_size, 1), np_ = std::int64_t(m_) << L_;
    leaf_.resize(std::size_t(1) << L_);
    for (int t = 0; t < int(leaf_.size()); ++t) leaf_[t] = tree.size(cluster_tree::level_begin(L_) + t);
    cap_ = p.max_rank > 0 ? p.max_rank : 512;
  }

  h2_data<T, Space> run(std::vector<hara_level_report>& report, std::ostream* log) {
    const auto t0 = clock::now();
    double sampling = 0;
    int s = m_ + p_.converge_samples + (p_.block_size + 1) / 2;
    for (int round = 0;; ++round) {
      const auto ts = clock::now();
      sample(s, round);
      sampling += since(ts);
      const int need = build();
      if (need == 0) break;
      s = std::max(need, s + p_.block_size);
    }
    report.assign(levels_.begin() + 1, levels_.end());
    for (auto& r : report) r.ranks_after = ranks_;
    hara_level_report total;
    total.level = L_ + 1;
    total.blocks = 1 << L_;
    total.samples = sym_ ? s_ : 2 * s_;
    total.seconds_sampling = sampling;
    total.seconds_ara = since(t0) - sampling;
    for (const auto& r : report) total.seconds_ara -= r.seconds_ara;
    total.ranks_after = ranks_;
    report.push_back(total);
    if (log) {
      *log << "hara: weak structure: one sample set of " << s_ << " columns" << (sym_ ? "" : " (and as many of M^T)")
           << std::endl;
      for (const auto& r : report) print_hara_level(log, r, L_);
    }
    return assemble();
  }
  double norm_estimate() const { return norm_; }

 private:
  using clock = std::chrono::steady_clock;
  static double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

  // Node t's block of a level's panel: base + at[t], leading dimension ld.
  struct panel {
    T* base = nullptr;
    std::vector<std::int64_t> at;
    int ld = 1;
  };
  // One level's nodes: rows on the row side (Y, Psi: the children's row ranks, or the leaf) and on the
  // column side (Omega, Z), the ranks found, the bases U (first ku columns of u) and V, and D.
  struct level_data {
    std::vector<int> nr, nc, ku, kv;
    int ld = 1;  // of every per-node block below: ld x s (u, v, samples) or ld x ld (d)
    buffer<T, Space> om, y, ps, z, u, v, d;
    int p = 0;   // held-out columns of the basis samples
    std::int64_t block(int t) const { return std::int64_t(t) * ld * ld; }
    int width() const { return ld + p; }  // of a node's basis samples W = Y P (at most its rows + p)
    std::int64_t basis_stride() const { return std::int64_t(ld) * width(); }
    std::int64_t basis_at(int t) const { return t * basis_stride(); }
  };

  // Columns s_ .. s - 1 of Omega, Y (and Psi, Z), in padded tree order; the earlier ones are kept.
  void sample(int s, int round) {
    auto& c = *ctx_;
    const int w = s - s_;
    auto grow = [&](buffer<T, Space>& b) {
      buffer<T, Space> g(ctx_, std::size_t(np_) * s);
      if (s_ > 0) copy(c, b.data(), g.data(), std::size_t(np_) * s_);
      b = std::move(g);
    };
    const int* map = H_.arrays->padded_to_user.data();
    auto draw = [&](buffer<T, Space>& in, buffer<T, Space>& out, bool transpose, std::uint64_t seed) {
      grow(in), grow(out);
      auto X = matrix<T, Space>::random(n_, w, seed, ctx_);
      auto Y = matrix<T, Space>::uninitialized(n_, w, ctx_);
      if (transpose) M_.apply_transpose(X.view(), Y.view());
      else M_.apply(X.view(), Y.view());
      const double sum = to_dense(Y).template cast<double>().squaredNorm();
      require<non_finite_value>(std::isfinite(sum), "hara: the operator's products are not finite");
      energy_ += sum, columns_ += w;
      gather_rows(c, map, np_, X.data(), n_, in.data() + std::size_t(np_) * s_, np_, w);
      gather_rows(c, map, np_, Y.data(), n_, out.data() + std::size_t(np_) * s_, np_, w);
      c.synchronize();
    };
    const std::uint64_t seed = splitmix64(p_.seed + 0x9e3779b97f4a7c15ull * std::uint64_t(round + 1));
    draw(omega_, y_, false, seed);
    if (!sym_) draw(psi_, z_, true, splitmix64(seed ^ 0x5851f42d4c957f2dull));
    s_ = s;
    norm_ = std::sqrt(energy_ / std::max(columns_, 1));
  }

  // The whole bottom-up pass on the current samples: 0 when every node had enough of them, else the
  // sample count the first short level asks for.
  int build() {
    lv_.clear();
    lv_.resize(std::size_t(L_) + 1);
    levels_.assign(std::size_t(L_) + 1, hara_level_report{});
    auto& leaves = lv_[L_];
    leaves.nr = leaves.nc = leaf_;
    leaves.ld = m_;
    for (int l = L_; l >= 1; --l) {
      const auto t0 = clock::now();
      const int need = level(l);
      levels_[l].seconds_ara = since(t0);
      if (need) return need;
    }
    return root();
  }

  panel samples(int l, bool omega_side, bool transpose_side) {
    const auto& d = lv_[l];
    const int nodes = 1 << l;
    panel p;
    p.at.resize(nodes);
    if (l == L_) {
      const buffer<T, Space>& b = transpose_side ? (omega_side ? psi_ : z_) : (omega_side ? omega_ : y_);
      p.base = const_cast<T*>(b.data()), p.ld = int(np_);
      for (int t = 0; t < nodes; ++t) p.at[t] = std::int64_t(t) * m_;
    } else {
      const buffer<T, Space>& b = transpose_side ? (omega_side ? d.ps : d.z) : (omega_side ? d.om : d.y);
      p.base = const_cast<T*>(b.data()), p.ld = d.ld;
      for (int t = 0; t < nodes; ++t) p.at[t] = std::int64_t(t) * d.ld * s_;
    }
    return p;
  }

  // For each node: G = Y Omega^+ (nout x nin at g + block(t)) and, when `basis` is given, the samples
  // W = Y P (nout x w) for an orthonormal P (s x w) in the null space of Omega: the first w - p columns
  // give the basis (their left singular vectors, in place), the last p, independent of them, measure
  // what each truncation of it leaves out (held out in `check`: U^T W2 and the squared norm of W2).
  void project(int l, int which, const level_data& d, const panel& om, const std::vector<int>& nin, const panel& y,
               const std::vector<int>& nout, buffer<T, Space>& g, buffer<T, Space>* basis, std::vector<double>* check) {
    const int nodes = int(nin.size()), ld = d.ld, s = s_, p = p_.converge_samples;
    const std::int64_t qs = std::int64_t(s) * ld, ps = std::int64_t(s) * d.width();
    buffer<T, Space> q(ctx_, std::size_t(nodes) * qs), r(ctx_, std::size_t(nodes) * ld * ld);
    g = buffer<T, Space>(ctx_, std::size_t(nodes) * ld * ld);
    fill(*ctx_, g.data(), g.size(), T(0));
    std::vector<item_copy> tr;
    std::vector<item_gemm> yq;
    std::vector<int> qn;
    std::vector<std::int64_t> qo, ro;
    for (int t = 0; t < nodes; ++t) {
      tr.push_back({s, nin[t], om.at[t], t * qs, om.ld, s});
      if (nin[t] > 0) qn.push_back(nin[t]), qo.push_back(t * qs), ro.push_back(d.block(t));
      yq.push_back({nout[t], nin[t], s, y.at[t], t * qs, d.block(t), y.ld, s, ld});
    }
    copy_items(ctx_, om.base, q.data(), tr, op::transpose);
    qr_items(q.data(), qo, std::vector<int>(qo.size(), s), qn, s, r.data(), ro, ld);  // Omega^T = Q R
    gemm_items(ctx_, op::none, op::none, T(1), y.base, q.data(), T(0), g.data(), yq);  // Y Q
    // G := (Y Q) R^{-T}: Omega^+ = Q R^{-T}.
    std::vector<int> tm, tn, tla;
    std::vector<std::int64_t> ta;
    for (int t = 0; t < nodes; ++t)
      if (nin[t] > 0 && nout[t] > 0) tm.push_back(nout[t]), tn.push_back(nin[t]), tla.push_back(ld), ta.push_back(d.block(t));
    if (!ta.empty()) {
      const int cnt = int(ta.size());
      buffer<int, Space> sz(ctx_, concatenate<int>({tm, tn, tla}));
      auto pa = pointers(ctx_, r.data(), ta), pb = pointers(ctx_, g.data(), ta);
      trsm_vbatched(*ctx_, side::right, uplo::upper, op::transpose, diag::non_unit, sz.data(), sz.data() + cnt, T(1),
                    (const T* const*)pa.data(), sz.data() + 2 * cnt, pb.data(), sz.data() + 2 * cnt, cnt,
                    *std::max_element(tm.begin(), tm.end()), *std::max_element(tn.begin(), tn.end()));
      ctx_->synchronize();
    }
    if (!basis) return;

    // P: Gaussian columns with their Q part removed, then orthonormalized.
    buffer<T, Space> P(ctx_, std::size_t(nodes) * ps), X(ctx_, std::size_t(nodes) * ld * d.width());
    fill_random(*ctx_, distribution::normal, s, std::size_t(nodes) * d.width(), P.data(), s,
                splitmix64(p_.seed ^ (0x6a09e667f3bcc909ull * std::uint64_t(1 + l + 64 * which + 256 * s))));
    std::vector<int> w(nodes);
    std::vector<item_gemm> qp, qx, yp;
    std::vector<int> pn;
    std::vector<std::int64_t> po, pr;
    buffer<T, Space> rp(ctx_, std::size_t(nodes) * d.width() * d.width());
    for (int t = 0; t < nodes; ++t) {
      w[t] = nout[t] > 0 ? std::min(s - nin[t], nout[t] + p) : 0;
      const std::int64_t xt = std::int64_t(t) * ld * d.width();
      qp.push_back({nin[t], w[t], s, t * qs, t * ps, xt, s, s, ld});
      qx.push_back({s, w[t], nin[t], t * qs, xt, t * ps, s, ld, s});
      if (w[t] > 0) pn.push_back(w[t]), po.push_back(t * ps), pr.push_back(std::int64_t(t) * d.width() * d.width());
      yp.push_back({nout[t], w[t], s, y.at[t], t * ps, d.basis_at(t), y.ld, s, ld});
    }
    gemm_items(ctx_, op::transpose, op::none, T(1), q.data(), P.data(), T(0), X.data(), qp);  // Q^T Gamma
    gemm_items(ctx_, op::none, op::none, T(-1), q.data(), X.data(), T(1), P.data(), qx);     // Gamma - Q Q^T Gamma
    qr_items(P.data(), po, std::vector<int>(po.size(), s), pn, s, rp.data(), pr, d.width());
    *basis = buffer<T, Space>(ctx_, std::size_t(nodes) * d.basis_stride());
    fill(*ctx_, basis->data(), basis->size(), T(0));
    gemm_items(ctx_, op::none, op::none, T(1), y.base, P.data(), T(0), basis->data(), yp);  // W = Y P

    // Left singular vectors of W1 (nout x (w - p)) in place; then U^T W2 and W2^T W2.
    std::vector<int> sm, sn, sld;
    std::vector<std::int64_t> so, sv;
    buffer<T, Space> sigma(ctx_, std::size_t(nodes) * ld);
    for (int t = 0; t < nodes; ++t)
      if (w[t] > p) sm.push_back(nout[t]), sn.push_back(w[t] - p), sld.push_back(ld), so.push_back(d.basis_at(t)),
            sv.push_back(std::int64_t(t) * ld);
    if (!so.empty()) {
      const int cnt = int(so.size());
      buffer<int, Space> sz(ctx_, concatenate<int>({sm, sn, sld}));
      auto pa = pointers(ctx_, basis->data(), so), pss = pointers(ctx_, sigma.data(), sv);
      svd_vbatched(*ctx_, sz.data(), sz.data() + cnt, pa.data(), sz.data() + 2 * cnt, pss.data(), (T* const*)nullptr,
                   (const int*)nullptr, cnt, *std::max_element(sm.begin(), sm.end()),
                   *std::max_element(sn.begin(), sn.end()));
      ctx_->synchronize();
    }
    // C = U^T W2 (u x p, ld ld), then W2 := W2 - U C and its Gram matrix (p x p, ld p): the error of
    // every truncation k <= u is a sum of squares, ||W2 - U C||^2 + sum_{i > k} ||C(i, :)||^2, with no
    // difference of large numbers (in float that difference alone would exceed the budget).
    const int cs = ld + p;
    buffer<T, Space> c(ctx_, std::size_t(nodes) * cs * p);
    fill(*ctx_, c.data(), c.size(), T(0));
    std::vector<item_gemm> uw, rw, ww;
    for (int t = 0; t < nodes; ++t) {
      if (w[t] <= p) continue;
      const int u = std::min(nout[t], w[t] - p);
      const std::int64_t w2 = d.basis_at(t) + std::int64_t(w[t] - p) * ld, ct = std::int64_t(t) * cs * p;
      uw.push_back({u, p, nout[t], d.basis_at(t), w2, ct, ld, ld, ld});
      rw.push_back({nout[t], p, u, d.basis_at(t), ct, w2, ld, ld, ld});
      ww.push_back({p, p, nout[t], w2, w2, ct + std::int64_t(ld) * p, ld, ld, p});
    }
    gemm_items(ctx_, op::transpose, op::none, T(1), basis->data(), basis->data(), T(0), c.data(), uw);
    gemm_items(ctx_, op::none, op::none, T(-1), basis->data(), c.data(), T(1), basis->data(), rw);
    gemm_items(ctx_, op::transpose, op::none, T(1), basis->data(), basis->data(), T(0), c.data(), ww);
    const auto ch = c.to_host();
    // check[t * (ld + 1) + k]: the held-out estimate of ||(I - U_k U_k^T) M(t, rest)||_F^2, k = 0..ld.
    check->assign(std::size_t(nodes) * (ld + 1), 0.0);
    for (int t = 0; t < nodes; ++t) {
      if (w[t] <= p) continue;
      const T* ct = ch.data() + std::size_t(t) * cs * p;
      double rest = 0;
      for (int j = 0; j < p; ++j) rest += double(ct[std::size_t(ld) * p + j * p + j]);
      const int u = std::min(nout[t], w[t] - p);
      double* e = check->data() + std::size_t(t) * (ld + 1);
      for (int k = ld; k >= 0; --k) {
        e[k] = rest / p;
        if (k >= 1 && k <= u)
          for (int j = 0; j < p; ++j) rest += double(ct[std::size_t(j) * ld + k - 1]) * double(ct[std::size_t(j) * ld + k - 1]);
      }
    }
  }

  // In-place thin QRs of the items at A + ao[i] (m[i] x n[i], ld lda), R at R + ro[i] (ld ldr).
  void qr_items(T* A, const std::vector<std::int64_t>& ao, const std::vector<int>& m, const std::vector<int>& n, int lda,
                T* R, const std::vector<std::int64_t>& ro, int ldr) {
    if (ao.empty()) return;
    const int cnt = int(ao.size());
    buffer<int, Space> sz(ctx_, concatenate<int>({m, n, std::vector<int>(cnt, lda), std::vector<int>(cnt, ldr)}));
    auto pa = pointers(ctx_, A, ao), pr = pointers(ctx_, R, ro);
    qr_vbatched(*ctx_, sz.data(), sz.data() + cnt, pa.data(), sz.data() + 2 * cnt, pr.data(), sz.data() + 3 * cnt, cnt,
                *std::max_element(m.begin(), m.end()), *std::max_element(n.begin(), n.end()));
    ctx_->synchronize();
  }

  // Node ranks: the smallest k whose held-out error fits the node's share of the budget, less what
  // the same tail leaks through Omega^+ into D (E ||Omega_t^+||_F^2 = n_in / (s - n_in - 1)). Returns
  // the sample count the level needs when some node found no such k (0 when none).
  int ranks(int l, const std::vector<double>& check, const std::vector<int>& nin, const std::vector<int>& nout,
            std::vector<int>& k) {
    const int nodes = int(nin.size()), ld = lv_[l].ld, p = p_.converge_samples;
    int live = 0;
    for (int t = 0; t < nodes; ++t) live += nout[t] > 0;
    // Level l's share halves from each level to the next one down: what a node's truncation discards
    // reappears in its parent's samples as noise (columns of Omega that V^T does not see), and a
    // parent with no more share than that noise chases it with rank (equal shares doubled the top
    // ranks; quarters sampled more, with no fewer ranks).
    const double e = 0.5 * p_.tol * norm_, rho = 0.5;
    const double shares = (1 - std::pow(rho, L_)) / (1 - rho);
    const double allowed = e * e / 2 * std::pow(rho, l - 1) / shares / std::max(live, 1);
    k.assign(nodes, 0);
    int need = 0;
    for (int t = 0; t < nodes; ++t) {
      if (nout[t] == 0) continue;
      const int w = std::min(s_ - nin[t], nout[t] + p), usable = std::min(nout[t], w - p);
      const double budget = allowed / (1 + double(nin[t]) / std::max(s_ - nin[t] - 1, 1));
      const double* err = check.data() + std::size_t(t) * (ld + 1);
      int keep = 0;
      while (keep < usable && err[keep] > budget) ++keep;
      if (err[keep] > budget && keep < nout[t]) {  // the samples cannot show a basis good enough
        need = std::max(need, s_ + p_.block_size);
        continue;
      }
      if (keep > cap_)
        throw rank_cap_reached("h2expr: hara: level " + std::to_string(l) + ": node " + std::to_string(t) +
                               " needs rank " + std::to_string(keep) + " > max_rank " + std::to_string(cap_) +
                               " for tol = " + std::to_string(p_.tol) + "; raise hara_options::max_rank");
      k[t] = keep;
    }
    return need;
  }

  // Level l's bases and D; the compressed samples of level l - 1. Returns what ranks() returns.
  int level(int l) {
    auto& d = lv_[l];
    d.p = p_.converge_samples;
    const int nodes = 1 << l, s = s_, ld = d.ld;
    int short_of = 0;  // every node's projections need s > its rows on either side, by p
    for (int t = 0; t < nodes; ++t)
      if (s < std::max(d.nr[t], d.nc[t]) + p_.converge_samples + 1)
        short_of = std::max(short_of, std::max(d.nr[t], d.nc[t]) + p_.converge_samples + 1);
    if (short_of) return short_of;
    buffer<T, Space> g, h;
    std::vector<double> su, sv;
    const auto om = samples(l, true, false), y = samples(l, false, false);
    project(l, 0, d, om, d.nc, y, d.nr, g, &d.u, &su);
    int need = ranks(l, su, d.nc, d.nr, d.ku);
    std::optional<panel> ps, z;
    if (!sym_) {
      ps = samples(l, true, true), z = samples(l, false, true);
      project(l, 1, d, *ps, d.nr, *z, d.nc, h, &d.v, &sv);
      need = std::max(need, ranks(l, sv, d.nr, d.nc, d.kv));
    } else {
      d.kv = d.ku;
    }
    auto& rep = levels_[l];
    rep.level = l, rep.blocks = nodes;
    rep.rank_min = *std::min_element(d.ku.begin(), d.ku.end());
    rep.rank_max = *std::max_element(d.ku.begin(), d.ku.end());
    rep.rank_avg = std::accumulate(d.ku.begin(), d.ku.end(), 0.0) / nodes;
    if (need) return need;
    const T* u = d.u.data();
    const T* v = sym_ ? d.u.data() : d.v.data();
    const T* hh = sym_ ? g.data() : h.data();
    // D = G + U E, E = U^T H^T - U^T G - (U^T H^T V) V^T.
    buffer<T, Space> e(ctx_, std::size_t(nodes) * ld * ld), x(ctx_, std::size_t(nodes) * ld * ld);
    d.d = buffer<T, Space>(ctx_, std::size_t(nodes) * ld * ld);
    fill(*ctx_, d.d.data(), d.d.size(), T(0));
    std::vector<item_gemm> e1, x1, e2, e3, d1;
    std::vector<item_copy> dg;
    for (int t = 0; t < nodes; ++t) {
      const int nr = d.nr[t], nc = d.nc[t], ku = d.ku[t], kv = d.kv[t];
      const std::int64_t b = d.block(t), ub = d.basis_at(t);
      e1.push_back({ku, nc, nr, ub, b, b, ld, ld, ld});
      x1.push_back({ku, kv, nc, b, ub, b, ld, ld, ld});
      e2.push_back({ku, nc, nr, ub, b, b, ld, ld, ld});
      e3.push_back({ku, nc, kv, b, ub, b, ld, ld, ld});
      dg.push_back({nr, nc, b, b, ld, ld});
      d1.push_back({nr, nc, ku, ub, b, b, ld, ld, ld});
    }
    gemm_items(ctx_, op::transpose, op::transpose, T(1), u, hh, T(0), e.data(), e1);  // U^T H^T
    gemm_items(ctx_, op::none, op::none, T(1), e.data(), v, T(0), x.data(), x1);      // (U^T H^T) V
    gemm_items(ctx_, op::transpose, op::none, T(-1), u, g.data(), T(1), e.data(), e2);
    gemm_items(ctx_, op::none, op::transpose, T(-1), x.data(), v, T(1), e.data(), e3);
    copy_items(ctx_, g.data(), d.d.data(), dg);
    gemm_items(ctx_, op::none, op::none, T(1), u, e.data(), T(1), d.d.data(), d1);
    if (sym_) symmetrize(d.d, d.nr, ld);
    compress_samples(l);
    return 0;
  }

  // D := (D + D^T) / 2 for a symmetric operator: its H2 matrix is then exactly symmetric.
  void symmetrize(buffer<T, Space>& D, const std::vector<int>& n, int ld) {
    buffer<T, Space> tr(ctx_, D.size());
    fill(*ctx_, tr.data(), tr.size(), T(0));
    std::vector<item_copy> items;
    for (int t = 0; t < int(n.size()); ++t) items.push_back({n[t], n[t], std::int64_t(t) * ld * ld, std::int64_t(t) * ld * ld, ld, ld});
    copy_items(ctx_, D.data(), tr.data(), items, op::transpose);
    axpby_2d(*ctx_, D.size(), 1, T(0.5), tr.data(), D.size(), T(0.5), D.data(), D.size());
  }

  // The parent level's samples: Omega^ = V^T Omega, Y^ = U^T (Y - D Omega) (and Psi^ = U^T Psi,
  // Z^ = V^T (Z - D^T Psi)), each child's rows after its sibling's.
  void compress_samples(int l) {
    auto& d = lv_[l];
    auto& up = lv_[l - 1];
    const int nodes = 1 << l, s = s_, ld = d.ld;
    const std::int64_t qs = std::int64_t(s) * ld;
    up.nr.assign(nodes / 2, 0), up.nc.assign(nodes / 2, 0);
    for (int t = 0; t < nodes; ++t) up.nr[t / 2] += d.ku[t], up.nc[t / 2] += d.kv[t];
    up.ld = 1;
    for (int j = 0; j < nodes / 2; ++j) up.ld = std::max({up.ld, up.nr[j], up.nc[j]});
    const std::int64_t ups = std::int64_t(s) * up.ld;
    auto alloc = [&](buffer<T, Space>& b) {
      b = buffer<T, Space>(ctx_, std::size_t(nodes / 2) * ups);
      fill(*ctx_, b.data(), b.size(), T(0));
    };
    alloc(up.om), alloc(up.y);
    if (!sym_) alloc(up.ps), alloc(up.z);
    const T* u = d.u.data();
    const T* v = sym_ ? d.u.data() : d.v.data();
    buffer<T, Space> tmp(ctx_, std::size_t(nodes) * qs);
    // One side: out^ = B^T (Yside - op(D) in) into the parent's `to` at the child's row offset.
    auto side = [&](const panel& in, const panel& out, const std::vector<int>& nin, const std::vector<int>& nout,
                    const T* bin, const std::vector<int>& kin, const T* bout, const std::vector<int>& kout, op dop,
                    buffer<T, Space>& to_in, buffer<T, Space>& to_out) {
      std::vector<item_gemm> hin, dt, hout;
      std::vector<item_copy> cy;
      for (int t = 0; t < nodes; ++t) {
        const std::int64_t parent = std::int64_t(t / 2) * ups;
        const int oin = (t & 1) ? kin[t - 1] : 0, oout = (t & 1) ? kout[t - 1] : 0;
        hin.push_back({kin[t], s, nin[t], d.basis_at(t), in.at[t], parent + oin, ld, in.ld, up.ld});
        cy.push_back({nout[t], s, out.at[t], t * qs, out.ld, ld});
        dt.push_back({nout[t], s, nin[t], d.block(t), in.at[t], t * qs, ld, in.ld, ld});
        hout.push_back({kout[t], s, nout[t], d.basis_at(t), t * qs, parent + oout, ld, ld, up.ld});
      }
      gemm_items(ctx_, op::transpose, op::none, T(1), bin, in.base, T(0), to_in.data(), hin);
      copy_items(ctx_, out.base, tmp.data(), cy);
      gemm_items(ctx_, dop, op::none, T(-1), d.d.data(), in.base, T(1), tmp.data(), dt);
      gemm_items(ctx_, op::transpose, op::none, T(1), bout, tmp.data(), T(0), to_out.data(), hout);
    };
    side(samples(l, true, false), samples(l, false, false), d.nc, d.nr, v, d.kv, u, d.ku, op::none, up.om, up.y);
    if (!sym_)
      side(samples(l, true, true), samples(l, false, true), d.nr, d.nc, u, d.ku, v, d.kv, op::transpose, up.ps, up.z);
  }

  // The root's D = Y Omega^+ (the compressed matrix of the two top nodes, whole).
  int root() {
    auto& d = lv_[0];
    const int p = p_.converge_samples;
    if (s_ < d.nc[0] + p) return d.nc[0] + p;
    buffer<T, Space> g;
    project(0, 0, d, samples(0, true, false), d.nc, samples(0, false, false), d.nr, g, nullptr, nullptr);
    d.d = std::move(g);
    if (sym_) symmetrize(d.d, d.nr, d.ld);
    return 0;
  }

  // The H2 matrix: bases from U and V, couplings and dense leaves from D and the cores C, top-down.
  h2_data<T, Space> assemble() {
    h2_data<T, Space>& H = H_;
    std::vector<std::vector<int>> ku(L_ + 1), kv(L_ + 1);
    ku[0] = kv[0] = {0};
    ranks_.assign(std::size_t(L_) + 1, 0);
    for (int l = 1; l <= L_; ++l) {
      ku[l] = lv_[l].ku, kv[l] = lv_[l].kv;
      for (int t = 0; t < (1 << l); ++t) ranks_[l] = std::max({ranks_[l], ku[l][t], kv[l][t]});
    }
    H.rank = ranks_;
    const auto rows = make_basis_layout(ku, ranks_), cols = make_basis_layout(kv, ranks_);
    auto basis = [&](const std::vector<std::vector<int>>& k, const basis_layout& lay, bool col) {
      auto B = std::make_shared<basis_tree<T, Space>>();
      B->node_rank = k, B->orthonormal = true;
      B->leaves = buffer<T, Space>(ctx_, std::size_t(m_) * lay.total(L_));
      fill(*ctx_, B->leaves.data(), B->leaves.size(), T(0));
      std::vector<item_copy> items;
      const auto& d = lv_[L_];
      for (int t = 0; t < (1 << L_); ++t)
        items.push_back({d.nr[t], k[L_][t], d.basis_at(t), std::int64_t(m_) * lay.at(L_, t), d.ld, m_});
      copy_items(ctx_, (col ? d.v : d.u).data(), B->leaves.data(), items);
      B->transfers.resize(std::size_t(L_) + 1);
      for (int l = 1; l <= L_; ++l) {
        B->transfers[l] = buffer<T, Space>(ctx_, std::size_t(lay.transfers[l].back()));
        items.clear();
        const auto& pd = lv_[l - 1];
        if (l > 1)
          for (int j = 0; j < (1 << (l - 1)); ++j)
            items.push_back({lay.stack(l, j), k[l - 1][j], pd.basis_at(j), lay.transfer(l, j), pd.ld,
                             std::max(lay.stack(l, j), 1)});
        if (l > 1) copy_items(ctx_, (col ? pd.v : pd.u).data(), B->transfers[l].data(), items);
      }
      return B;
    };
    H.row_basis = basis(ku, rows, false);
    H.col_basis = sym_ ? H.row_basis : basis(kv, cols, true);

    // C per level (ld of the level, k_u x k_v), the couplings and the dense leaves.
    std::vector<buffer<T, Space>> C(std::size_t(L_) + 1);
    for (int l = 1; l <= L_; ++l) {
      const auto& d = lv_[l];
      const auto& pd = lv_[l - 1];
      const int nodes = 1 << l;
      C[l] = buffer<T, Space>(ctx_, std::size_t(nodes) * d.ld * d.ld);
      fill(*ctx_, C[l].data(), C[l].size(), T(0));
      const auto off = H.coupling_offsets(l, rows, cols);
      H.coupling[l] = buffer<T, Space>(ctx_, std::size_t(off.back()));
      fill(*ctx_, H.coupling[l].data(), H.coupling[l].size(), T(0));
      // E_a C_parent (k_u(a) x k_v(parent)) first, then the D blocks and the products with F^T.
      buffer<T, Space> ec(ctx_, std::size_t(nodes) * d.ld * std::max(pd.ld, 1));
      const std::int64_t ecs = std::int64_t(d.ld) * std::max(pd.ld, 1);
      std::vector<item_gemm> g1, gc, gs;
      std::vector<item_copy> cc, cs;
      const T* pu = l > 1 ? pd.u.data() : nullptr;
      const T* pv = l > 1 ? (sym_ ? pd.u.data() : pd.v.data()) : nullptr;
      for (int a = 0; a < nodes; ++a) {
        const int j = a / 2, b = a ^ 1;
        const int ro = (a & 1) ? d.ku[a - 1] : 0, co = (a & 1) ? d.kv[a - 1] : 0, cob = (b & 1) ? d.kv[b - 1] : 0;
        const std::int64_t dj = pd.block(j), uj = pd.basis_at(j), blk = off[S_.blocks().coupling[l].row_ptr[a]];
        cc.push_back({d.ku[a], d.kv[a], dj + ro + std::int64_t(co) * pd.ld, d.block(a), pd.ld, d.ld});
        cs.push_back({d.ku[a], d.kv[b], dj + ro + std::int64_t(cob) * pd.ld, blk, pd.ld, std::max(d.ku[a], 1)});
        if (l > 1) {
          const int kj = lv_[l - 1].ku[j], kvj = lv_[l - 1].kv[j];
          g1.push_back({d.ku[a], kvj, kj, uj + ro, C_offset(l - 1, j), a * ecs, pd.ld, pd.ld, d.ld});
          gc.push_back({d.ku[a], d.kv[a], kvj, a * ecs, uj + co, d.block(a), d.ld, pd.ld, d.ld});
          gs.push_back({d.ku[a], d.kv[b], kvj, a * ecs, uj + cob, blk, d.ld, pd.ld, std::max(d.ku[a], 1)});
        }
      }
      copy_items(ctx_, pd.d.data(), C[l].data(), cc);
      copy_items(ctx_, pd.d.data(), H.coupling[l].data(), cs);
      if (l > 1) {
        gemm_items(ctx_, op::none, op::none, T(1), pu, C[l - 1].data(), T(0), ec.data(), g1);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pv, T(1), C[l].data(), gc);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pv, T(1), H.coupling[l].data(), gs);
      }
    }
    // Dense leaves: D + U C V^T.
    const auto& d = lv_[L_];
    const int leaves = 1 << L_;
    buffer<T, Space> uc(ctx_, std::size_t(leaves) * d.ld * d.ld);
    std::vector<item_gemm> g1, g2;
    std::vector<item_copy> cd;
    const auto& dn = S_.blocks().dense;
    for (int a = 0; a < leaves; ++a) {
      const std::int64_t e = std::int64_t(dn.row_ptr[a]) * m_ * m_, ua = d.basis_at(a);
      cd.push_back({d.nr[a], d.nc[a], d.block(a), e, d.ld, m_});
      g1.push_back({d.nr[a], d.kv[a], d.ku[a], ua, d.block(a), d.block(a), d.ld, d.ld, d.ld});
      g2.push_back({d.nr[a], d.nc[a], d.kv[a], d.block(a), ua, e, d.ld, d.ld, m_});
    }
    copy_items(ctx_, d.d.data(), H.dense.data(), cd);
    gemm_items(ctx_, op::none, op::none, T(1), d.u.data(), C[L_].data(), T(0), uc.data(), g1);
    gemm_items(ctx_, op::none, op::transpose, T(1), uc.data(), (sym_ ? d.u : d.v).data(), T(1), H.dense.data(), g2);
    ctx_->synchronize();
    return std::move(H_);
  }

  std::int64_t C_offset(int l, int t) const { return lv_[l].block(t); }

  const sampler<T, Space>& M_;
  context_ptr<Space> ctx_;
  ::h2expr::structure<T> S_;
  hara_parameters p_;
  bool sym_;
  int L_ = 0, m_ = 1, cap_ = 512, s_ = 0;
  index n_ = 0;
  std::int64_t np_ = 0;
  std::vector<int> leaf_, ranks_;
  buffer<T, Space> omega_, y_, psi_, z_;  // np x s_ each, padded tree order
  h2_data<T, Space> H_;  // the result: index arrays and zero dense leaves from the start
  std::vector<level_data> lv_;
  std::vector<hara_level_report> levels_;
  double norm_ = 0, energy_ = 0;
  int columns_ = 0;
};

}  // namespace h2expr::detail
