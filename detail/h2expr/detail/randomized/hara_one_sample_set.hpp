#pragma once
// HARA from one set of samples (Levitt and Martinsson, "Linear-complexity black-box randomized
// compression of rank-structured matrices", SISC 2024, there for weak structures; here for any
// structure whose near fields nest). One Gaussian block Omega of s columns, Y = M Omega (with Psi,
// Z = M^T Psi for a general operator), serves every level: samples no longer add up level by level,
// and s is about a node's near field's rows plus the ranks, independent of n. From the leaves up, for
// each node t with N(t) its near field (the nodes of its level whose blocks with t are not admissible,
// t among them) and (Omega_N, Y_t) the samples of those rows (a leaf's rows; above, the children's
// compressed samples):
//   1. Q = orth(Omega_N^T). Y_t (I - Q Q^T) = M(t, far) Omega(far) (I - Q Q^T) samples t's far field with
//      Gaussian columns and never sees its near blocks: U_t is its leading left singular vectors, each
//      truncation measured on held-out columns; V_t likewise from (Psi, Z).
//   2. G = Y_t Omega_N^+ = M(t, N) + M(t, far) Omega(far) Omega_N^+, whose leak lies in range(U_t) (H,
//      from Z, leaks into range(V_s)), so per near pair D_ts = (I - U U^T) G_ts + U U^T ((I - V V^T) H_st)^T
//      = M(t, s) - U_t U_t^T M(t, s) V_s V_s^T up to the truncations.
//   3. Omega^_t = V^T Omega_t, Y^_t = U^T (Y_t - sum_s D_ts Omega_s) (Psi^, Z^ likewise): samples of the
//      compressed matrix U^T M V, which the parents stack. At the root, D = Y Omega^+.
// Then top-down every near pair's core C (its block of the compressed matrix, in the bases) splits
// into its children's blocks: D + E C F^T is the coupling block of an admissible child pair and the
// core of a near one; a dense leaf is D + U C V^T. The bases come out orthonormal and nested, each node
// at its own rank. Every node needs s above its near rows by p (p = converge_samples) + block_size / 2
// and, beyond 64 rows, by half the excess (needs(): keeps Omega_N well conditioned, so that its Gram
// matrix's Cholesky factor replaces a QR, and the leak through Omega_N^+ small) and by its rank: s
// starts at what the leaves need and grows to what the first short level asks for (block_size more
// when a node's rank did not fit), sampling only the new columns;
// levels already built keep their bases and near blocks and only compress the new columns upward.
// The leaves' Omega (and Psi) is not held: its chunks are drawn again from their seeds where they are
// read, so that Y (and Z) is the only panel of all n rows there; where memory is short, nor is Omega^
// (Psi^) of the levels just above whose ranks fill their children's rows (derived): it is drawn through
// the bases below.
#include <h2expr/detail/core/splitmix.hpp>
#include <h2expr/detail/randomized/hara.hpp>
#include <h2expr/detail/randomized/near_field_projection.hpp>
#include <h2expr/detail/randomized/sample_rounds.hpp>
#include <h2expr/detail/primitives/items.hpp>

#include <numeric>
#include <unordered_map>
#include <type_traits>

namespace h2expr::detail {

// One level's nodes: rows on the row side (Y, Psi: the children's row ranks, or the leaf) and on the
// column side (Omega, Z), the ranks found, the bases U (first ku columns of u) and V; per near pair
// (t, s) the block D (nr[t] x nc[s], packed) and where s's rows sit in t's stacked near field (offr:
// columns of Omega, offc: of Psi), whose widths are wr and wc.
template <class T, class Space>
struct one_sample_set_level : level_blocks {  // per-node blocks: ld x s (u, v, samples)
  std::vector<int> nr, nc, ku, kv, wr, wc;
  std::vector<int> offr, offc;
  // Near pair e = (t, s)'s D at dat[e], leading dimension dld(t): packed at each pair's own size, since
  // every level's D is held until the assembly (at ld x ld, 6.3 GB in a step of the 2^17 inverse).
  std::vector<std::int64_t> dat;
  int dld(int t) const { return std::max(nr[t], 1); }
  buffer<T, Space> om, y, ps, z, u, v, d;
  int first = 0;  // the first sample column that om, y, ps and z hold (a finished level: the new ones,
                  // or a streamed block's; a derived level holds y and z alone)
  int width = 0;  // the columns they have room for, from first (the first unfinished level's panels
                  // take a streamed round's columns block by block: sample())
  bool derived = false;  // om and ps are not held but drawn through the bases below (test_side)
};

template <class T, class Space>
class one_sample_set_builder
    : sample_rounds<one_sample_set_builder<T, Space>, one_sample_set_level<T, Space>, T, Space> {
  H2EXPR_SAMPLE_ROUNDS(one_sample_set_builder, one_sample_set_level);

 public:
  one_sample_set_builder(const sampler<T, Space>& M, const ::h2expr::structure<T>& S, hara_parameters p,
                    std::vector<near_field> near)
      : rounds(M.context_ptr(), p, M.symmetric(), std::move(near), S.row_tree(), S.depth(), S.row_tree().max_leaf_size),
        M_(M), S_(S), H_(zero_h2<T, Space>(ctx_, S, sym_)) {
    n_ = S.rows(), np_ = std::int64_t(m_) << L_;
  }

  h2_data<T, Space> run(std::vector<hara_level_report>& report, std::ostream* log) {
    const auto t0 = clock::now();
    this->start_rounds();
    levels_.assign(std::size_t(L_) + 1, hara_level_report{});
    lv_[L_].nr = lv_[L_].nc = leaf_;
    lv_[L_].ld = m_;
    double sampling = 0, building = 0;
    this->run_rounds(sampling, building);
    for (int l = 1; l <= L_; ++l) levels_[l].seconds_ara = level_seconds_[l];
    report.assign(levels_.begin() + 1, levels_.end());
    hara_level_report total;
    total.level = L_ + 1;
    total.blocks = near_[L_].pairs();
    total.samples = sym_ ? s_ : 2 * s_;
    total.seconds_sampling = sampling;
    auto H = assemble();
    total.seconds_ara = since(t0) - sampling;  // what no level's share holds: the assembly
    for (const auto& r : report) total.seconds_ara -= r.seconds_ara;
    // One recompression with the other half of the error budget: the truncations above are each
    // node's alone, blind to what its ancestors' couplings weigh in its rows; this one ranks every node
    // by its weights (in the tests a 2D kernel's level-3 rank was 35 without it, 6 with compress()).
    const auto tc = clock::now();
    double harmonic = 0;  // keep_frobenius_share lets level l discard budget / l
    for (int l = 1; l <= L_; ++l) harmonic += 1.0 / l;
    const double e = 0.5 * p_.tol * norm_;
    on_uniform_layout(H, [&](h2_data<T, Space>& u, kept_ranks* own) {
      return recompress(u, keep_frobenius_share{e * e / harmonic / (weights_from_rows_alone(u) ? 2 : 1)},
                        &total.compression, nullptr, own);
    });
    ranks_ = H.rank;
    total.seconds_compress = since(tc);
    total.ranks_after = ranks_;
    for (auto& r : report) r.ranks_after = ranks_;
    report.push_back(total);
    if (log) {
      *log << "hara: one sample set of " << s_ << " columns" << (sym_ ? "" : " (and as many of M^T)") << std::endl;
      for (const auto& r : report) print_hara_level(log, r, L_);
    }
    return H;
  }
  double norm_estimate() const { return norm_; }

 private:
  double since(clock::time_point t0) const { return seconds_since(*ctx_, t0); }

  using panel = sample_panel<T>;

  // Columns s_ .. s - 1 of Y (and Z), in padded tree order, at column - base_ of the panels; Omega
  // (and Psi) are not held: test_side() draws their chunks again where they are read. Until the
  // leaves are built the earlier columns are kept, and on the host the panels grow to twice what is
  // asked, so that a round or two more need no copy (room never written costs no memory there: its
  // pages are faulted in when written; a device allocation holds all of its memory, so the CUDA
  // space's panels hold what is asked, and a later round copies them on the device). Once the leaves
  // are built, a round's columns can go through the finished levels in blocks as they are drawn
  // (hara_parameters::stream_columns), into the first unfinished level's panels (compress_finished):
  // no finished level's panel then holds more than a block (at n = 2^15 an inverse step's last round
  // held 2,290 columns of Y, of its parents' Y^ and of Omega^, 1.7 GB, where the step's peak came).
  void sample(int s, int round) {
    auto& c = *ctx_;
    const int w = s - s_, r0 = s_;
    int block = w;  // a multiple of chunk_ where streamed, so that test_side() draws the same columns
    if (done_ <= L_ && p_.stream_columns != 0) {
      const double per_column = 3.0 * (sym_ ? 1 : 2) * double(np_) * sizeof(T);
      const double fit = p_.stream_columns > 0 ? std::ceil(double(p_.stream_columns) / chunk_) * chunk_
                                               : std::max<double>(chunk_, p_.hold_share * double(memory_available(c)) / per_column);
      if (fit < w) block = int(fit) / chunk_ * chunk_;
    }
    const bool stream = block < w;
    // Growing the panels writes their earlier columns again (the old ones are freed after); a chunk of
    // test columns and its products come on top.
    const std::size_t panel_columns = stream ? block : (s - base_ > room_ ? s - base_ : w);
    check_sample_memory(c, (sym_ ? 1 : 2) * std::size_t(np_) * sizeof(T) * panel_columns +
                               4 * std::size_t(np_) * sizeof(T) * std::size_t(std::min(chunk_, w)),
                        s, np_);
    if (!stream && s - base_ > room_) {
      room_ = base_ > 0 || !space_traits<Space>::commits_on_write ? s - base_ : 2 * s;
      auto grow = [&](buffer<T, Space>& b) {
        buffer<T, Space> g(ctx_, std::size_t(np_) * room_);
        if (s_ > base_) copy(c, b.data(), g.data(), std::size_t(np_) * (s_ - base_));
        b = std::move(g);
      };
      grow(y_);
      if (!sym_) grow(z_);
    }
    const int* map = H_.arrays->padded_to_user.data();
    // M's exact diagonal part is not sampled (hara() adds it to the result), but it counts in ||M||_F,
    // which the tolerance is relative to: d in padded tree order, for the panels.
    const auto* d = M_.diagonal();
    if (d && dp_.empty()) {
      dp_ = buffer<T, Space>(ctx_, std::size_t(np_));
      gather_rows(c, map, np_, d->data(), n_, dp_.data(), np_, 1);
    }
    // An operator offering its products in this tree's padded order (hara of A * A on A's tree)
    // writes the panels directly: no block reordered.
    const bool tree_order = H_.works_in(M_.tree_order());
    // At most chunk_ columns per product: the operator's own temporaries (an expression's
    // intermediate products, HGEMV's padded copies) scale with the columns it is given; whole sample
    // sets of 3D structures (2,754 columns at n = 64,000) put them at 1.4 GB each.
    buffer<T, Space> xp(ctx_, std::size_t(np_) * std::min(chunk_, w));
    // The round's columns a .. b - 1 (from its first, r0).
    auto draw = [&](buffer<T, Space>& out, bool transpose, std::uint64_t seed, int a, int b) {
      const op t = transpose ? op::transpose : op::none;
      for (int j = a; j < b; j += chunk_) {
        const int cols = std::min(chunk_, b - j);
        T* Xp = xp.data();
        T* Yp = out.data() + std::size_t(np_) * (r0 + j - base_);
        {
          auto X = test_columns(seed, j, cols, Xp);
          if (tree_order) {
            M_.tree_apply(t, const_view<T, Space>(Xp, np_, cols, np_, &c), view<T, Space>(Yp, np_, cols, np_, &c));
          } else {
            auto Y = matrix<T, Space>::uninitialized(n_, cols, ctx_);
            if (transpose) M_.apply_transpose_off_diagonal(X.view(), Y.view());
            else M_.apply_off_diagonal(X.view(), Y.view());
            gather_rows(c, map, np_, Y.data(), n_, Yp, np_, cols);
          }
        }
        double sum = 0;  // ||(M - diag(d) + diag(d)) Omega||_F^2 (padding rows are zeros)
        if (d) {
          auto Yd = matrix<T, Space>::uninitialized(np_, cols, ctx_);
          copy(c, Yp, Yd.data(), std::size_t(np_) * cols);
          axpby_2d(c, std::size_t(np_), std::size_t(cols), T(1), Xp, std::size_t(np_), T(1), Yd.data(),
                   std::size_t(np_), dp_.data());
          sum = sum_of_squares(c, Yd.data(), std::size_t(np_) * cols);
        } else {
          sum = sum_of_squares(c, Yp, std::size_t(np_) * cols);
        }
        require<non_finite_value>(std::isfinite(sum), "hara: the operator's products are not finite");
        energy_ += sum, columns_ += cols;
      }
    };
    const std::uint64_t seed = splitmix64(p_.seed + 0x9e3779b97f4a7c15ull * std::uint64_t(round + 1));
    draws_.push_back({s_, s, seed});
    for (int a = 0; a < w; a += block) {
      const int b = std::min(w, a + block);
      if (stream) {  // the leaves' panels hold this block alone (compress_samples gives them back)
        base_ = r0 + a;
        for (auto* p : {&y_, &z_})
          if ((p == &y_ || !sym_) && p->size() < std::size_t(np_) * block) *p = buffer<T, Space>(ctx_, std::size_t(np_) * block);
      }
      draw(y_, false, seed, a, b);
      if (!sym_) draw(z_, true, psi_seed(seed), a, b);
      if (stream) s_ = r0 + b, this->compress_finished(r0 + a, s);
    }
    prev_ = r0, s_ = s;
    this->streamed_ = stream;
    norm_ = std::sqrt(energy_ / std::max(columns_, 1));
  }

  // Columns j .. j + cols - 1 of the test matrix that `seed` draws, as sample() draws them (j a
  // multiple of chunk_ from the round's first column): the entries are functions of the user's index,
  // whatever the order (as on the ranks). Into Xp in padded tree order; returns them in the user's.
  matrix<T, Space> test_columns(std::uint64_t seed, int j, int cols, T* Xp) {
    auto X = matrix<T, Space>::random(n_, cols, splitmix64(seed + std::uint64_t(j)), ctx_);
    gather_rows(*ctx_, H_.arrays->padded_to_user.data(), np_, X.data(), n_, Xp, np_, cols);
    return X;
  }
  static std::uint64_t psi_seed(std::uint64_t seed) { return splitmix64(seed ^ 0x5851f42d4c957f2dull); }

  // Level l's test side (Omega, or Psi with transpose_side) in column chunks: a level's own panel
  // whole; the leaves' drawn again chunk by chunk, as sample() drew them, where they are read. Every
  // use of them is a sum over the columns (near-field Gram blocks, Y Omega_N^T, Omega R) or acts on
  // each column alone (the parents' samples), and holding them beside Y doubled the leaves' panels of
  // all n rows. The bottom levels whose Omega^ = V^T Omega is as large (ranks that fill the children)
  // draw it the same way where memory is short (derived), through the bases below (through_bases).
  column_source<T> test_side(int l, bool transpose_side) {
    if (l < L_) return lv_[l].derived ? through_bases(l, transpose_side) : whole(samples(l, true, transpose_side));
    return [this, transpose_side](int c0, int c1, const chunk_visitor<T>& f) {
      buffer<T, Space> xp;
      panel p;
      p.at.resize(std::size_t(1) << L_), p.ld = int(np_);
      for (const auto& r : draws_)
        for (int j = r.first; j < r.end; j += chunk_) {
          const int cols = std::min(chunk_, r.end - j), a = std::max(j, c0), b = std::min(j + cols, c1);
          if (a >= b) continue;
          if (xp.size() < std::size_t(np_) * cols) xp = buffer<T, Space>(ctx_, std::size_t(np_) * chunk_);
          test_columns(transpose_side ? psi_seed(r.seed) : r.seed, j - r.first, cols, xp.data());
          p.base = xp.data();
          for (int t = 0; t < int(p.at.size()); ++t) p.at[t] = std::int64_t(t) * m_ - std::int64_t(j) * np_;
          f(p, a, b - a);
        }
    };
  }

  // Level l's Omega^ = V^T Omega (Psi^ = U^T Psi with transpose_side) from level l + 1's test side,
  // chunk_ columns at a time, as compress_samples() would hold it: each parent's block stacks its
  // children's. The levels below are derived too, down to the leaves, whose test side is drawn again
  // from its seeds: so every column is there, those of earlier rounds included.
  column_source<T> through_bases(int l, bool transpose_side) {
    return [this, l, transpose_side, below = test_side(l + 1, transpose_side)](int c0, int c1, const chunk_visitor<T>& f) {
      if (c1 <= c0) return;
      const auto& d = lv_[l + 1];
      const auto& up = lv_[l];
      const int nodes = 1 << (l + 1);
      const T* b = transpose_side || sym_ ? d.u.data() : d.v.data();
      const std::vector<int>& k = transpose_side ? d.ku : d.kv;
      const std::vector<int>& nin = transpose_side ? d.nr : d.nc;
      buffer<T, Space> out(ctx_, std::size_t(nodes / 2) * up.ld * std::min(chunk_, c1 - c0));
      panel p;
      p.at.resize(nodes / 2), p.ld = up.ld;
      p.base = out.data();
      std::vector<item_gemm> items;
      below(c0, c1, [&](const panel& in, int first, int cols) {
        for (int j = first; j < first + cols; j += chunk_) {
          const int w = std::min(chunk_, first + cols - j);
          fill(*ctx_, out.data(), std::size_t(nodes / 2) * up.ld * w, T(0));  // rows past a parent's ranks
          items.clear();
          for (int t = 0; t < nodes; ++t)
            items.push_back({k[t], w, nin[t], d.basis_at(t), in.at[t] + std::int64_t(j) * in.ld,
                             std::int64_t(t / 2) * w * up.ld + ((t & 1) ? k[t - 1] : 0), d.ld, in.ld, up.ld});
          gemm_items(ctx_, op::transpose, op::none, T(1), b, in.base, T(0), out.data(), items);
          for (int t = 0; t < nodes / 2; ++t) p.at[t] = (std::int64_t(t) * w - j) * up.ld;
          f(p, j, w);
        }
      });
    };
  }

  // Where each near partner's rows sit in a node's stacked near field, for both sides.
  void near_layout(int l) {
    auto& d = lv_[l];
    const auto& f = near_[l];
    const int nodes = 1 << l;
    d.wr.assign(nodes, 0), d.wc.assign(nodes, 0), d.offr.assign(f.pairs(), 0), d.offc.assign(f.pairs(), 0);
    d.dat = f.packed(d.nr, d.nc);
    d.nearw = 1;
    for (int t = 0; t < nodes; ++t) {
      for (int e = f.ptr[t]; e < f.ptr[t + 1]; ++e)
        d.offr[e] = d.wr[t], d.wr[t] += d.nc[f.col[e]], d.offc[e] = d.wc[t], d.wc[t] += d.nr[f.col[e]];
      d.nearw = std::max({d.nearw, d.wr[t], d.wc[t]});
    }
  }

  // Level l's panel of Omega or Y (omega_side), or of Psi or Z (transpose_side). The leaves hold Y and
  // Z alone: there omega_side is ignored, and their Omega and Psi come from test_side().
  panel samples(int l, bool omega_side, bool transpose_side) {
    auto& d = lv_[l];
    const int nodes = 1 << l;
    panel p;
    p.at.resize(nodes);
    if (l == L_) {
      buffer<T, Space>& b = transpose_side ? z_ : y_;
      p.base = b.data(), p.ld = int(np_);
      for (int t = 0; t < nodes; ++t) p.at[t] = std::int64_t(t) * m_ - std::int64_t(base_) * np_;  // + column * np_
    } else {
      buffer<T, Space>& b = transpose_side ? (omega_side ? d.ps : d.z) : (omega_side ? d.om : d.y);
      p.base = b.data(), p.ld = d.ld;
      for (int t = 0; t < nodes; ++t) p.at[t] = (std::int64_t(t) * d.width - d.first) * d.ld;  // + column * ld
    }
    return p;
  }

  // project_near_fields on level l's samples (side 0: Omega and Y; 1: Psi and Z).
  void project(int l, int which, level_data& d, column_source<T> om, const std::vector<int>& rows, const std::vector<int>& off,
               const std::vector<int>& nin, const panel& y, const std::vector<int>& nout, buffer<T, Space>& g,
               buffer<T, Space>* basis, std::vector<double>* check) {
    const projection_shape sh{d, l, which, s_, p_.seed};
    if (basis) {
      *basis = buffer<T, Space>(ctx_, std::size_t(nin.size()) * d.basis_stride());
      fill(*ctx_, basis->data(), basis->size(), T(0));
    }
    project_near_fields(ctx_, sh, near_side<T>{near_[l], std::move(om), rows, off, nin, y, nout}, g, basis ? basis->data() : nullptr, check);
  }

  // Node ranks (node_ranks) within level l's share of half the construction's budget.
  int ranks(int l, const std::vector<double>& check, const std::vector<int>& nin, const std::vector<int>& nout,
            std::vector<int>& k) {
    int live = 0;
    for (int t = 0; t < int(nin.size()); ++t) live += nout[t] > 0;
    const double share = level_share(0.5 * p_.tol * norm_, l, L_, live);
    return node_ranks(l, s_, lv_[l].ld, p_.converge_samples, p_.block_size, check, nin, nout, share, cap_, p_.tol, 0, k);
  }

  // Level l's bases and near blocks D; the compressed samples of level l - 1. Returns what ranks()
  // returns.
  int level(int l) {
    auto& d = lv_[l];
    const auto& f = near_[l];
    d.p = p_.converge_samples;
    for (int t = 0; t < (1 << l); ++t) d.ld = std::max({d.ld, d.nr[t], d.nc[t]});
    near_layout(l);
    const int nodes = 1 << l, ld = d.ld;
    int more = 0;
    for (int t = 0; t < nodes; ++t) more = std::max(more, short_of(std::max(d.wr[t], d.wc[t])));
    if (more) return more;
    {  // the projections' G (and H) and bases, the near blocks D, and E and X below
      const std::size_t side = std::size_t(nodes) * ld * (d.nearw + ld + d.p);
      check_memory(*ctx_, sizeof(T) * ((sym_ ? 1 : 2) * side + std::size_t(d.dat.back()) + 2 * std::size_t(nodes) * ld * ld),
                   "hara: level " + std::to_string(l) + "'s bases and near blocks (" + std::to_string(s_) + " samples)");
    }
    buffer<T, Space> g, h;
    std::vector<double> su, sv;
    project(l, 0, d, test_side(l, false), d.nc, d.offr, d.wr, samples(l, false, false), d.nr, g, &d.u, &su);
    int need = ranks(l, su, d.wr, d.nr, d.ku);
    if (!sym_) {
      project(l, 1, d, test_side(l, true), d.nr, d.offc, d.wc, samples(l, false, true), d.nc, h, &d.v, &sv);
      need = std::max(need, ranks(l, sv, d.wc, d.nc, d.kv));
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
    const std::vector<int>& hoff = sym_ ? d.offr : d.offc;
    // Per near pair (t, s): D = G_ts + U_t E, E = U_t^T H_st^T - U_t^T G_ts - (U_t^T H_st^T V_s) V_s^T.
    // One near partner of every node at a time, so that E and X hold a block per node, not per pair
    // (two levels above the leaves of the 2^17 inverse, 2 GB each).
    int most = 0;
    for (int t = 0; t < nodes; ++t) most = std::max(most, f.ptr[t + 1] - f.ptr[t]);
    const std::size_t block = std::size_t(ld) * ld;
    buffer<T, Space> e(ctx_, std::size_t(nodes) * block), x(ctx_, std::size_t(nodes) * block);
    d.d = buffer<T, Space>(ctx_, std::size_t(d.dat.back()));  // no fill: each block is copied from G, then U E added
    std::vector<item_gemm> e1, x1, e2, e3, d1;
    std::vector<item_copy> dg;
    for (int j = 0; j < most; ++j) {
      for (auto* v : {&e1, &x1, &e2, &e3, &d1}) v->clear();
      dg.clear();
      for (int t = 0; t < nodes; ++t) {
        if (f.ptr[t] + j >= f.ptr[t + 1]) continue;
        const int q = f.ptr[t] + j, c = f.col[q], nr = d.nr[t], nc = d.nc[c], ku = d.ku[t], kv = d.kv[c];
        const std::int64_t b = d.dat[q], w = std::int64_t(t) * ld * ld, ut = d.basis_at(t), vc = d.basis_at(c);
        const std::int64_t gts = d.row_block(t) + std::int64_t(d.offr[q]) * ld;
        const std::int64_t hst = d.row_block(c) + std::int64_t(hoff[f.mirror[q]]) * ld;
        e1.push_back({ku, nc, nr, ut, hst, w, ld, ld, ld});
        x1.push_back({ku, kv, nc, w, vc, w, ld, ld, ld});
        e2.push_back({ku, nc, nr, ut, gts, w, ld, ld, ld});
        e3.push_back({ku, nc, kv, w, vc, w, ld, ld, ld});
        dg.push_back({nr, nc, gts, b, ld, d.dld(t)});
        d1.push_back({nr, nc, ku, ut, w, b, ld, ld, d.dld(t)});
      }
      gemm_items(ctx_, op::transpose, op::transpose, T(1), u, hh, T(0), e.data(), e1);  // U^T H^T
      gemm_items(ctx_, op::none, op::none, T(1), e.data(), v, T(0), x.data(), x1);      // (U^T H^T) V
      gemm_items(ctx_, op::transpose, op::none, T(-1), u, g.data(), T(1), e.data(), e2);
      gemm_items(ctx_, op::none, op::transpose, T(-1), x.data(), v, T(1), e.data(), e3);
      copy_items(ctx_, g.data(), d.d.data(), dg);
      gemm_items(ctx_, op::none, op::none, T(1), u, e.data(), T(1), d.d.data(), d1);
    }
    for (auto* b : {&g, &h, &e, &x}) *b = buffer<T, Space>();  // before the parents' samples take their room
    if (sym_) symmetrize(l);
    compress_samples(l, 0);
    return 0;
  }

  // D_ts := (D_ts + D_st^T) / 2 for a symmetric operator: its H2 matrix is then exactly symmetric.
  void symmetrize(int l) {
    auto& d = lv_[l];
    const auto& f = near_[l];
    buffer<T, Space> tr(ctx_, d.d.size());  // every block written: each pair has its mirror
    std::vector<item_copy> items;
    for (int t = 0; t + 1 < int(f.ptr.size()); ++t)
      for (int q = f.ptr[t]; q < f.ptr[t + 1]; ++q) {
        const int c = f.col[q];
        items.push_back({d.nr[t], d.nc[c], d.dat[f.mirror[q]], d.dat[q], d.dld(c), d.dld(t)});
      }
    copy_items(ctx_, d.d.data(), tr.data(), items, op::transpose);
    axpby_2d(*ctx_, d.d.size(), 1, T(0.5), tr.data(), d.d.size(), T(0.5), d.d.data(), d.d.size());
  }

  // The parent level's samples: Omega^ = V^T Omega, Y^ = U^T (Y - sum_s D_ts Omega_s) (and Psi^ =
  // U^T Psi, Z^ = V^T (Z - sum_t D_ts^T Psi_t)), each child's rows after its sibling's; columns c0 ..
  // s_ - 1. A parent level still to be built keeps its first c0 columns before them, in panels with
  // room for `end` columns (s_ unless streamed: the round's last); a finished one holds the new
  // columns alone. Level l's samples are read no more after this (release_samples), so
  // each of its panels goes as soon as the last parent panel that reads it is written: Y^ and Z^ first,
  // then Y and Z go, then Omega^ and Psi^, which a derived parent does not hold at all (test_side):
  // where the parents' panels are as large as the leaves' (ranks that fill the leaves), this call is the
  // construction's peak, with three such panels alive for a symmetric operator (two when derived).
  void compress_samples(int l, int c0, int end = -1) {
    auto& d = lv_[l];
    auto& up = lv_[l - 1];
    const auto& f = near_[l];
    const int nodes = 1 << l, s = s_ - c0, ld = d.ld;
    up.nr.assign(nodes / 2, 0), up.nc.assign(nodes / 2, 0);
    for (int t = 0; t < nodes; ++t) up.nr[t / 2] += d.ku[t], up.nc[t / 2] += d.kv[t];
    up.ld = 1;
    for (int j = 0; j < nodes / 2; ++j) up.ld = std::max({up.ld, up.nr[j], up.nc[j]});
    up.first = l - 1 >= done_ ? c0 : 0;
    // A streamed round's later blocks find the panels made (their earlier columns written in place).
    const int width = (l - 1 >= done_ || end < 0 ? s_ : end) - up.first, was = up.width;
    const bool made = width == was && l - 1 < done_ && c0 > up.first;
    up.width = width;
    if (end >= 0) ++levels_[l].blocks_streamed;
    // Omega^ (and Psi^) of at least half the leaves' rows (the bottom levels, whose ranks fill their
    // children's rows), from the leaves up, is drawn through the bases where read (test_side) once
    // holding it would take more than hold_share of the memory available. Once drawn, always drawn in
    // this construction: a level drawn in an earlier round holds no earlier columns to keep.
    const std::size_t test_bytes = std::size_t(sym_ ? 1 : 2) * std::size_t(nodes / 2) * std::size_t(up.ld) *
                                   std::size_t(width) * sizeof(T);
    up.derived = up.derived || ((l == L_ || d.derived) && std::int64_t(nodes / 2) * up.ld * 2 >= np_ &&
                                double(test_bytes) > p_.hold_share * double(memory_available(*ctx_)));
    if (up.derived) {
      up.om = buffer<T, Space>(), up.ps = buffer<T, Space>();
      if (l - 1 >= 1) levels_[l - 1].test_side_drawn = true;
    }
    // ups: a parent's block; old: the elements of its columns before c0 that it keeps.
    const std::int64_t ups = std::int64_t(width) * up.ld, old = std::int64_t(c0 - up.first) * up.ld;
    std::size_t bd = 0;  // a bound on B^T D's elements (products() below), either side
    for (int t = 0; t < nodes; ++t)
      for (int q = f.ptr[t]; q < f.ptr[t + 1]; ++q)
        bd += std::size_t(std::max(d.ku[t], d.kv[t])) * std::size_t(std::max(d.nr[f.col[q]], d.nc[f.col[q]]));
    check_memory(*ctx_, sizeof(T) * ((made ? 0 : std::size_t(sym_ ? 1 : 2) * (up.derived ? 1 : 2) * std::size_t(nodes / 2) * std::size_t(ups)) + bd),
                 "hara: level " + std::to_string(l - 1) + "'s samples (" + std::to_string(width) + " columns)");
    auto alloc = [&](buffer<T, Space>& b) {
      if (made) return;
      buffer<T, Space> g(ctx_, std::size_t(nodes / 2) * ups);
      fill(*ctx_, g.data(), g.size(), T(0));
      if (old > 0) {  // each parent's old columns (up.ld x (c0 - first) of a block of `was`) start its new block
        std::vector<item_copy> keep;
        for (int j = 0; j < nodes / 2; ++j)
          keep.push_back({up.ld, c0 - up.first, std::int64_t(j) * was * up.ld, j * ups, up.ld, up.ld});
        copy_items(ctx_, b.data(), g.data(), keep);
      }
      b = std::move(g);
    };
    const T* u = d.u.data();
    const T* v = sym_ ? d.u.data() : d.v.data();
    int most = 0;
    for (int t = 0; t < nodes; ++t) most = std::max(most, f.ptr[t + 1] - f.ptr[t]);
    // The side whose samples are products (Y or Z): out^ = B^T out - sum_s (B^T op(D)) in_s into the
    // parent's blocks. The near blocks are projected first (E = B^T op(D), k x nin each, packed at eat),
    // so the products with the samples have k rows, not ld; the sum goes one near partner at a time
    // (each writes every node's block once).
    auto products = [&](const column_source<T>& in, const panel& out, const std::vector<int>& nin, const std::vector<int>& nout,
                        const T* bout, const std::vector<int>& kout, bool mirror, buffer<T, Space>& to_out) {
      alloc(to_out);
      const auto eat = f.packed(kout, nin);
      std::vector<item_gemm> hout, be;
      for (int t = 0; t < nodes; ++t) {
        const int oout = (t & 1) ? kout[t - 1] : 0;
        const std::int64_t oc = out.at[t] + std::int64_t(c0) * out.ld;
        hout.push_back({kout[t], s, nout[t], d.basis_at(t), oc, std::int64_t(t / 2) * ups + old + oout, ld, out.ld, up.ld});
        for (int q = f.ptr[t]; q < f.ptr[t + 1]; ++q) {
          const int c = f.col[q];
          be.push_back({kout[t], nin[c], nout[t], d.basis_at(t), d.dat[mirror ? f.mirror[q] : q], eat[q], ld,
                        d.dld(mirror ? c : t), std::max(kout[t], 1)});
        }
      }
      buffer<T, Space> e(ctx_, std::size_t(eat.back()));
      gemm_items(ctx_, op::transpose, op::none, T(1), bout, out.base, T(0), to_out.data(), hout);
      gemm_items(ctx_, op::transpose, mirror ? op::transpose : op::none, T(1), bout, d.d.data(), T(0), e.data(), be);
      in(c0, s_, [&](const panel& in, int first, int cols) {
        const std::int64_t o = std::int64_t(first) * in.ld, oc = old + std::int64_t(first - c0) * up.ld;
        for (int j = 0; j < most; ++j) {
          std::vector<item_gemm> es;
          for (int t = 0; t < nodes; ++t) {
            if (f.ptr[t] + j >= f.ptr[t + 1]) continue;
            const int q = f.ptr[t] + j, c = f.col[q], oout = (t & 1) ? kout[t - 1] : 0;
            es.push_back({kout[t], cols, nin[c], eat[q], in.at[c] + o, std::int64_t(t / 2) * ups + oc + oout, std::max(kout[t], 1),
                          in.ld, up.ld});
          }
          gemm_items(ctx_, op::none, op::none, T(-1), e.data(), in.base, T(1), to_out.data(), es);
        }
      });
    };
    // The side of the test matrix (Omega or Psi): in^ = B^T in.
    auto tests = [&](const column_source<T>& in, const std::vector<int>& nin, const T* bin, const std::vector<int>& kin,
                     buffer<T, Space>& to_in) {
      alloc(to_in);
      in(c0, s_, [&](const panel& in, int first, int cols) {
        const std::int64_t o = std::int64_t(first) * in.ld, oc = old + std::int64_t(first - c0) * up.ld;
        std::vector<item_gemm> hin;
        for (int t = 0; t < nodes; ++t) {
          const int oin = (t & 1) ? kin[t - 1] : 0;
          hin.push_back({kin[t], cols, nin[t], d.basis_at(t), in.at[t] + o, std::int64_t(t / 2) * ups + oc + oin, ld, in.ld, up.ld});
        }
        gemm_items(ctx_, op::transpose, op::none, T(1), bin, in.base, T(0), to_in.data(), hin);
      });
    };
    // Level l's panel of one kind (the leaves' or the level's own), given back.
    auto drop = [&](bool omega_side, bool transpose_side) {
      if (l == L_) {
        if (!omega_side) (transpose_side ? z_ : y_) = buffer<T, Space>();  // the leaves' Omega is drawn, not held
      }
      else (transpose_side ? (omega_side ? d.ps : d.z) : (omega_side ? d.om : d.y)) = buffer<T, Space>();
    };
    products(test_side(l, false), samples(l, false, false), d.nc, d.nr, u, d.ku, false, up.y);
    drop(false, false);
    if (!sym_) {
      products(test_side(l, true), samples(l, false, true), d.nr, d.nc, v, d.kv, true, up.z);
      drop(false, true);
    }
    if (up.derived) return;  // the parents' test side is drawn where read
    tests(test_side(l, false), d.nc, v, d.kv, up.om);
    drop(true, false);
    if (!sym_) {
      tests(test_side(l, true), d.nr, u, d.ku, up.ps);
      drop(true, true);
    }
  }

  // The root's D = Y Omega^+ (the compressed matrix of the two top nodes, whole).
  int root() {
    auto& d = lv_[0];
    d.ld = std::max({1, d.nr[0], d.nc[0]});
    near_layout(0);
    if (const int more = short_of(d.nc[0])) return more;
    buffer<T, Space> g;
    project(0, 0, d, test_side(0, false), d.nc, d.offr, d.wr, samples(0, false, false), d.nr, g, nullptr, nullptr);
    d.d = buffer<T, Space>(ctx_, std::size_t(d.dat.back()));  // node 0's block (nc[0] columns of ld rows) is pair 0's
    copy_items(ctx_, g.data(), d.d.data(), std::vector<item_copy>{{d.nr[0], d.nc[0], 0, 0, d.ld, d.dld(0)}});
    if (sym_) symmetrize(0);
    return 0;
  }

  // The H2 matrix: bases from U and V; top-down, every near pair's core C (its block of the compressed
  // matrix one level up, in the bases) splits into its children's blocks: D + E C F^T gives the coupling
  // blocks of the admissible children and the cores of the near ones; dense leaves are D + U C V^T.
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

    // The cores: per near pair e = (a, b) of a level, ku(a) x kv(b) at cat[l][e], leading dimension ku(a).
    std::vector<buffer<T, Space>> C(std::size_t(L_) + 1);
    std::vector<std::vector<std::int64_t>> cat(std::size_t(L_) + 1);
    for (int l = 1; l <= L_; ++l) {
      const auto& d = lv_[l];
      auto& pd = lv_[l - 1];
      const auto& pf = near_[l - 1];
      const auto& f = near_[l];
      const auto& adm = S_.blocks().coupling[l];
      cat[l] = f.packed(d.ku, d.kv);
      C[l] = buffer<T, Space>(ctx_, std::size_t(cat[l].back()));
      fill(*ctx_, C[l].data(), C[l].size(), T(0));
      const auto off = H.coupling_offsets(l, rows, cols);
      H.coupling[l] = buffer<T, Space>(ctx_, std::size_t(off.back()));
      fill(*ctx_, H.coupling[l].data(), H.coupling[l].size(), T(0));
      // Per parent pair (j, i) and row child a: E_a C_ji (ku(a) x kv(i)); then per child pair (a, b)
      // its block of D_ji plus that times F_b^T, into the coupling block or the core. E_a C_ji is packed
      // at eat[2 q + ha] (leading dimension ku(a)).
      std::vector<std::int64_t> eat(std::size_t(2) * pf.pairs() + 1, 0);
      if (l > 1)
        for (int j = 0; j < (1 << (l - 1)); ++j)
          for (int q = pf.ptr[j]; q < pf.ptr[j + 1]; ++q)
            for (int ha = 0; ha < 2; ++ha)
              eat[2 * q + ha + 1] = eat[2 * q + ha] + std::int64_t(d.ku[2 * j + ha]) * pd.kv[pf.col[q]];
      buffer<T, Space> ec(ctx_, std::size_t(eat.back()));
      std::vector<item_gemm> g1, gc, gs;
      std::vector<item_copy> cc, cs;
      const T* pu = l > 1 ? pd.u.data() : nullptr;
      const T* pv = l > 1 ? (sym_ ? pd.u.data() : pd.v.data()) : nullptr;
      for (int j = 0; j < (1 << (l - 1)); ++j)
        for (int q = pf.ptr[j]; q < pf.ptr[j + 1]; ++q) {
          const int i = pf.col[q];
          for (int ha = 0; ha < 2; ++ha) {
            const int a = 2 * j + ha, ro = ha ? d.ku[a - 1] : 0;
            const std::int64_t et = eat[2 * q + ha];
            const int lde = std::max(d.ku[a], 1);
            if (l > 1) g1.push_back({d.ku[a], pd.kv[i], pd.ku[j], pd.basis_at(j) + ro, cat[l - 1][q], et, pd.ld,
                                    std::max(pd.ku[j], 1), lde});
            for (int hb = 0; hb < 2; ++hb) {
              const int b = 2 * i + hb, co = hb ? d.kv[b - 1] : 0;
              const std::int64_t src = pd.dat[q] + ro + std::int64_t(co) * pd.dld(j);
              std::int64_t dst;
              int ldd;
              bool coupling;
              const int blk = int(std::find(adm.col.begin() + adm.row_ptr[a], adm.col.begin() + adm.row_ptr[a + 1], b) -
                                  adm.col.begin());
              if (blk < adm.row_ptr[a + 1]) coupling = true, dst = off[blk], ldd = std::max(d.ku[a], 1);
              else {
                const int e = f.find(a, b);
                if (e < 0) throw invalid_argument("hara: a block of the structure is neither admissible nor near");
                coupling = false, dst = cat[l][e], ldd = std::max(d.ku[a], 1);
              }
              (coupling ? cs : cc).push_back({d.ku[a], d.kv[b], src, dst, pd.dld(j), ldd});
              if (l > 1)
                (coupling ? gs : gc).push_back({d.ku[a], d.kv[b], pd.kv[i], et, pd.basis_at(i) + co, dst, lde, pd.ld, ldd});
            }
          }
        }
      copy_items(ctx_, pd.d.data(), C[l].data(), cc);
      copy_items(ctx_, pd.d.data(), H.coupling[l].data(), cs);
      if (l > 1) {
        gemm_items(ctx_, op::none, op::none, T(1), pu, C[l - 1].data(), T(0), ec.data(), g1);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pv, T(1), C[l].data(), gc);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pv, T(1), H.coupling[l].data(), gs);
      }
      // Level l - 1 is read no more: its near blocks, bases and cores go (a level's D and cores are as
      // large as the result's couplings or larger, and held together they were the construction's peak).
      C[l - 1] = buffer<T, Space>();
      for (auto* b : {&pd.d, &pd.u, &pd.v}) *b = buffer<T, Space>();
    }
    // Dense leaves (the leaves' near pairs, in the dense blocks' order): D + U C V^T, U C one near
    // partner of every leaf at a time (a block per leaf, not per pair).
    const auto& d = lv_[L_];
    const auto& f = near_[L_];
    std::vector<item_copy> cd;
    int most = 0;
    for (int a = 0; a < (1 << L_); ++a) {
      most = std::max(most, f.ptr[a + 1] - f.ptr[a]);
      for (int q = f.ptr[a]; q < f.ptr[a + 1]; ++q)
        cd.push_back({d.nr[a], d.nc[f.col[q]], d.dat[q], std::int64_t(q) * m_ * m_, d.dld(a), m_});
    }
    copy_items(ctx_, d.d.data(), H.dense.data(), cd);
    if (L_ >= 1) {
      const std::int64_t block = std::int64_t(d.ld) * d.ld;
      buffer<T, Space> uc(ctx_, std::size_t(std::int64_t(1) << L_) * std::size_t(block));
      std::vector<item_gemm> g1, g2;
      for (int j = 0; j < most; ++j) {
        g1.clear(), g2.clear();
        for (int a = 0; a < (1 << L_); ++a) {
          if (f.ptr[a] + j >= f.ptr[a + 1]) continue;
          const int q = f.ptr[a] + j, b = f.col[q];
          const std::int64_t w = a * block, e = std::int64_t(q) * m_ * m_;
          g1.push_back({d.nr[a], d.kv[b], d.ku[a], d.basis_at(a), cat[L_][q], w, d.ld, std::max(d.ku[a], 1), d.ld});
          g2.push_back({d.nr[a], d.nc[b], d.kv[b], w, d.basis_at(b), e, d.ld, d.ld, m_});
        }
        gemm_items(ctx_, op::none, op::none, T(1), d.u.data(), C[L_].data(), T(0), uc.data(), g1);
        gemm_items(ctx_, op::none, op::transpose, T(1), uc.data(), (sym_ ? d.u : d.v).data(), T(1), H.dense.data(), g2);
      }
    }
    return std::move(H_);
  }

  const sampler<T, Space>& M_;
  ::h2expr::structure<T> S_;
  h2_data<T, Space> H_;  // the result: index arrays and zero dense leaves from the start
  index n_ = 0;
  std::int64_t np_ = 0;
  std::vector<int> ranks_;
  buffer<T, Space> dp_;  // M's diagonal part in padded tree order, if any
  static constexpr int chunk_ = 256;  // test columns per product, drawn and drawn again
  struct drawn { int first, end; std::uint64_t seed; };
  std::vector<drawn> draws_;  // each round's columns of the test matrices, and the seed they come from
  std::vector<hara_level_report> levels_;
  double norm_ = 0, energy_ = 0;
  int columns_ = 0;
};

}  // namespace h2expr::detail
