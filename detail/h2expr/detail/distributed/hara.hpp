#pragma once
// Distributed HARA from one set of samples: the single process's construction
// (randomized/hara_one_sample_set.hpp) on each rank's share of the target's tree, for symmetric
// operators. The samples Omega, Y = M Omega are split by rows like the matrix (Y by distributed
// products; Omega drawn where it is used: an entry is a function of the user's index, so a rank
// draws its neighbours' leaves' rows itself and every rank sees the single process's Omega). From the
// leaves up to the C-level each rank builds its own nodes; per level, one message per neighbour in
// each of three steps brings what its near fields hold of other ranks' nodes:
//   their ranks and bases and their G blocks of the pairs they share (for D), then their D blocks
//   (D_ts := (D_ts + D_st^T) / 2), then their compressed samples (the parents' near fields).
// The C-level's compressed samples are summed over the ranks (each row from one rank: exact), and
// every rank builds the top, as the products do. Top-down, each rank assembles its own block rows;
// one recompression (compress's, on the ranks) ends it. Rounds that need more samples start over
// with the earlier columns kept (the single process keeps finished levels: the two may then differ
// within the tolerance).
#include <h2expr/detail/distributed/compress.hpp>
#include <h2expr/detail/distributed/expression.hpp>
#include <h2expr/detail/operations/hara.hpp>
#include <h2expr/detail/randomized/hara_one_sample_set.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

namespace h2expr::detail {

// keep_frobenius_share (randomized/hara.hpp) with the level's total over every rank.
struct frobenius_share_over_ranks {
  double budget2;
  template <class T>
  std::vector<int> operator()(int level, const std::vector<T>& sigma, int k, double total) const {
    const std::size_t nodes = sigma.size() / std::size_t(std::max(k, 1));
    std::vector<int> r(nodes, 0);
    if (total == 0) return r;
    for (std::size_t t = 0; t < nodes; ++t) {
      double z2 = 0;
      for (int i = 0; i < k; ++i) z2 += double(sigma[t * k + i]) * double(sigma[t * k + i]);
      const double allowed = budget2 / std::max(level, 1) * z2 / total;
      double tail = 0;
      int keep = k;
      while (keep > 0) {
        const double s = double(sigma[t * k + keep - 1]);
        if (tail + s * s > allowed) break;
        tail += s * s, --keep;
      }
      r[t] = keep;
    }
    return r;
  }
};

struct distributed_hara_result_report {
  int samples = 0;
  double norm_estimate = 0, seconds_sampling = 0, seconds_build = 0, seconds_compress = 0;
  std::int64_t bytes_sent = 0, messages_sent = 0;  // this rank's, in the construction's own exchanges
  std::vector<int> rank_min, rank_max;             // per level, over every rank, before the recompression
};

template <class T, class Space>
class distributed_sample_builder {
 public:
  distributed_sample_builder(const distributed::expression<T, Space>& M, hara_parameters p)
      : M_(M), A_(M.layout()), comm_(*A_.comm), D_(A_.dist), ctx_(A_.ctx), p_(p) {
    L_ = A_.depth(), c_ = D_.c, m_ = A_.m_max, cap_ = p.max_rank > 0 ? p.max_rank : 512;
    near_ = near_fields(A_.structure.blocks());
    const auto& tree = A_.structure.row_tree();
    leaf_.resize(std::size_t(1) << L_);
    for (int t = 0; t < int(leaf_.size()); ++t) leaf_[t] = tree.size(cluster_tree::level_begin(L_) + t);
  }

  // Collective: the construction before its final recompression (which hara() runs).
  distributed_data<T, Space> run(distributed_hara_result_report& rep) {
    require(!near_.empty(), "distributed hara: the structure's near fields do not nest");
    require(L_ >= 1, "distributed hara: the structure is a single leaf (build it in one process)");
    using clock = std::chrono::steady_clock;
    lv_.clear();
    lv_.resize(static_cast<std::size_t>(L_) + 1);
    ku_.assign(std::size_t(L_) + 1, {});
    for (int l = 0; l <= L_; ++l) number(l);
    int s = m_ + p_.converge_samples + (p_.block_size + 1) / 2;
    for (int a = 0; a < (1 << L_); ++a) {
      int rows = 0;
      for (int e = near_[L_].ptr[a]; e < near_[L_].ptr[a + 1]; ++e) rows += leaf_[near_[L_].col[e]];
      s = std::max(s, needs(rows));
    }
    for (int round = 0;; ++round) {
      const auto t0 = clock::now();
      sample(s, round);
      rep.seconds_sampling += std::chrono::duration<double>(clock::now() - t0).count();
      const auto t1 = clock::now();
      const int need = build();
      rep.seconds_build += std::chrono::duration<double>(clock::now() - t1).count();
      if (need == 0) break;
      s = std::max(need, s + p_.block_size);
    }
    rep.samples = s_;
    rep.norm_estimate = norm_;
    rep.rank_min.assign(std::size_t(L_) + 1, 0), rep.rank_max.assign(std::size_t(L_) + 1, 0);
    for (int l = 1; l <= L_; ++l)
      if (!ku_[l].empty()) {
        rep.rank_min[l] = *std::min_element(ku_[l].begin(), ku_[l].end());
        rep.rank_max[l] = *std::max_element(ku_[l].begin(), ku_[l].end());
      }
    const auto t2 = clock::now();
    auto H = assemble();
    rep.seconds_build += std::chrono::duration<double>(clock::now() - t2).count();
    rep.bytes_sent = bytes_sent_, rep.messages_sent = messages_sent_;
    return H;
  }
  double norm_estimate() const { return norm_; }

 private:
  struct panel {
    T* base = nullptr;
    std::vector<std::int64_t> at;
    int ld = 1;
  };
  // One level in this rank's numbering: own nodes (global b0 .. b0 + own - 1; every node of a level
  // above the C-level) then ghosts (the other ranks' nodes in the own nodes' near fields). f: the own
  // nodes' near pairs, columns local, mirror the local pair of the transpose (-1 when its row is
  // another rank's). Per neighbour: the own nodes it holds as ghosts and its nodes held here, the pairs
  // with a partner there (in the order of the global index of the pair's transpose, to send, or of the
  // pair, to receive; both sides then list the same pairs alike).
  struct level_data {
    bool top = false;
    int own = 0, b0 = 0;
    std::vector<int> ghost;
    near_field f;
    int pair0 = 0;  // the global index of local pair 0
    std::vector<int> peers;
    std::vector<std::vector<int>> send_nodes, recv_nodes, send_pairs, recv_pairs;
    std::vector<int> slot;  // per local pair with a remote transpose: its place among the received blocks
    int remote = 0;
    std::vector<int> nr, ku;  // per local node
    std::vector<int> wr, offr;
    int ld = 1, nearw = 1, p = 0;
    buffer<T, Space> om, y, u, d, rg, rd;  // rg, rd: the received G and D blocks (ld x ld each)
    int nodes() const { return own + int(ghost.size()); }
    int global(int t) const { return t < own ? b0 + t : ghost[std::size_t(t - own)]; }
    std::int64_t pair(int e) const { return std::int64_t(e) * ld * ld; }
    std::int64_t row_block(int t) const { return std::int64_t(t) * ld * nearw; }
    int width() const { return ld + p; }
    std::int64_t basis_stride() const { return std::int64_t(ld) * width(); }
    std::int64_t basis_at(int t) const { return t * basis_stride(); }
  };

  int local(int l, int g) const {
    const auto& d = lv_[l];
    if (g >= d.b0 && g < d.b0 + d.own) return g - d.b0;
    const auto it = std::lower_bound(d.ghost.begin(), d.ghost.end(), g);
    require(it != d.ghost.end() && *it == g, "distributed hara: a node outside this rank's near fields");
    return d.own + int(it - d.ghost.begin());
  }

  void number(int l) {
    auto& d = lv_[l];
    const auto& nf = near_[l];
    d.top = l < c_;
    d.own = d.top ? 1 << l : D_.count(l);
    d.b0 = d.top ? 0 : D_.begin(l);
    d.pair0 = nf.ptr[d.b0];
    for (int t = d.b0; t < d.b0 + d.own; ++t)
      for (int e = nf.ptr[t]; e < nf.ptr[t + 1]; ++e)
        if (nf.col[e] < d.b0 || nf.col[e] >= d.b0 + d.own) d.ghost.push_back(nf.col[e]);
    std::sort(d.ghost.begin(), d.ghost.end());
    d.ghost.erase(std::unique(d.ghost.begin(), d.ghost.end()), d.ghost.end());
    d.f.ptr.assign(1, 0);
    for (int t = d.b0; t < d.b0 + d.own; ++t) {
      for (int e = nf.ptr[t]; e < nf.ptr[t + 1]; ++e) {
        const int partner = nf.col[e], mirror = nf.mirror[e];
        d.f.col.push_back(local(l, partner));
        const bool mine = partner >= d.b0 && partner < d.b0 + d.own;
        d.f.mirror.push_back(mine ? mirror - d.pair0 : -1);
      }
      d.f.ptr.push_back(int(d.f.col.size()));
    }
    if (d.top) return;
    // Neighbours: the owners of the ghosts (near fields are symmetric: they hold the own nodes alike).
    std::vector<int> owner(d.ghost.size());
    for (std::size_t g = 0; g < d.ghost.size(); ++g) owner[g] = D_.owner(l, d.ghost[g]);
    d.peers = owner;
    std::sort(d.peers.begin(), d.peers.end());
    d.peers.erase(std::unique(d.peers.begin(), d.peers.end()), d.peers.end());
    const std::size_t P = d.peers.size();
    d.send_nodes.assign(P, {}), d.recv_nodes.assign(P, {}), d.send_pairs.assign(P, {}), d.recv_pairs.assign(P, {});
    auto peer_of = [&](int q) { return int(std::lower_bound(d.peers.begin(), d.peers.end(), q) - d.peers.begin()); };
    for (std::size_t g = 0; g < d.ghost.size(); ++g) d.recv_nodes[peer_of(owner[g])].push_back(d.own + int(g));
    std::vector<std::pair<int, int>> sends, receives;  // (global key, local pair) per peer, sorted below
    std::vector<std::vector<std::pair<int, int>>> s_list(P), r_list(P);
    for (int t = 0; t < d.own; ++t) {
      std::vector<int> seen;
      for (int e = d.f.ptr[t]; e < d.f.ptr[t + 1]; ++e) {
        const int c = d.f.col[e];
        if (c < d.own) continue;
        const int i = peer_of(owner[std::size_t(c - d.own)]);
        if (std::find(seen.begin(), seen.end(), i) == seen.end()) seen.push_back(i), d.send_nodes[i].push_back(t);
        s_list[i].emplace_back(nf.mirror[d.pair0 + e], e);
        r_list[i].emplace_back(d.pair0 + e, e);
      }
    }
    d.slot.assign(d.f.col.size(), -1);
    d.remote = 0;
    for (std::size_t i = 0; i < P; ++i) {
      std::sort(s_list[i].begin(), s_list[i].end());
      std::sort(r_list[i].begin(), r_list[i].end());
      for (const auto& [key, e] : s_list[i]) d.send_pairs[i].push_back(e);
      for (const auto& [key, e] : r_list[i]) d.recv_pairs[i].push_back(e), d.slot[e] = d.remote++;
    }
  }

  int needs(int nin) const { return nin + std::max(0, nin / 2 - 32) + p_.converge_samples + (p_.block_size + 1) / 2; }
  int short_of(int nin) const { return s_ < nin + (needs(nin) - nin + 1) / 2 ? needs(nin) : 0; }

  // Collective helpers: a failure anywhere raises on every rank; the largest value over the ranks.
  void agree(const rank_failure& f) const { comm_.agree("distributed hara", {}, f); }
  int largest(int v) const {
    std::vector<std::int64_t> x{v};
    comm_.max(x);
    return int(x[0]);
  }

  // One message each way per neighbour of level l: out[i] to peers[i], in[i] (sized) from it.
  void swap(const level_data& d, std::vector<message<T, Space>>& out, std::vector<message<T, Space>>& in) {
    pending pm;
    for (std::size_t i = 0; i < d.peers.size(); ++i) {
      if (in[i].size()) pm.receive(comm_, in[i].mpi(), in[i].size(), d.peers[i]);
      if (out[i].size()) {
        pm.send(comm_, out[i].mpi(), out[i].size(), d.peers[i]);
        bytes_sent_ += std::int64_t(out[i].size() * sizeof(T)), ++messages_sent_;
      }
    }
    pm.wait();
    for (auto& m : in) m.after_receive();
  }
  // Packs rows x cols blocks (column-major, ld lds at src + offset) one after the other into a message.
  struct block_ref {
    int rows, cols;
    std::int64_t at;
    int ld;
  };
  message<T, Space> pack(const T* src, const std::vector<block_ref>& blocks) { return pack({{src, &blocks}}); }
  message<T, Space> pack(std::initializer_list<std::pair<const T*, const std::vector<block_ref>*>> groups) {
    std::int64_t n = 0;
    for (const auto& [src, blocks] : groups) n += values(*blocks);
    message<T, Space> m(ctx_, std::size_t(n));
    n = 0;
    for (const auto& [src, blocks] : groups) {
      std::vector<item_copy> items;
      for (const auto& b : *blocks) items.push_back({b.rows, b.cols, b.at, n, b.ld, std::max(b.rows, 1)}), n += std::int64_t(b.rows) * b.cols;
      copy_items(ctx_, src, m.data(), std::move(items));
    }
    ctx_->synchronize();
    m.before_send();
    return m;
  }
  static std::int64_t values(const std::vector<block_ref>& blocks) {
    std::int64_t n = 0;
    for (const auto& b : blocks) n += std::int64_t(b.rows) * b.cols;
    return n;
  }
  // The blocks of a received message, from its value `first` on, into dst.
  void unpack(message<T, Space>& m, T* dst, const std::vector<block_ref>& blocks, std::int64_t first = 0) {
    std::int64_t n = first;
    std::vector<item_copy> items;
    for (const auto& b : blocks) items.push_back({b.rows, b.cols, n, b.at, std::max(b.rows, 1), b.ld}), n += std::int64_t(b.rows) * b.cols;
    copy_items(ctx_, m.data(), dst, std::move(items));
  }

  // Columns s_ .. s - 1 of Omega (the own and the ghost leaves' rows) and Y = M Omega (the own leaves'),
  // in the single process's columns: chunks of 256 drawn from the round's seed.
  void sample(int s, int round) {
    auto& c = *ctx_;
    auto& d = lv_[L_];
    const int w = s - s_, nodes = d.nodes(), own = d.own;
    const std::int64_t rows_om = std::int64_t(std::max(nodes, 1)) * m_, rows_y = std::int64_t(std::max(own, 1)) * m_;
    auto grow = [&](buffer<T, Space>& b, std::int64_t rows) {
      buffer<T, Space> g(ctx_, std::size_t(rows) * s);
      if (s_ > 0) copy(c, b.data(), g.data(), std::size_t(rows) * s_);
      b = std::move(g);
    };
    grow(omega_, rows_om), grow(y_, rows_y);
    const auto& tree = A_.structure.row_tree();
    const int first_leaf = cluster_tree::level_begin(L_);
    const index local_rows = index(A_.local_indices.size());
    constexpr int chunk = 256;
    const std::uint64_t seed = splitmix64(p_.seed + 0x9e3779b97f4a7c15ull * std::uint64_t(round + 1));
    for (int j = 0; j < w; j += chunk) {
      const int cols = std::min(chunk, w - j);
      const std::uint64_t cs = splitmix64(seed + std::uint64_t(j));
      // The panel's rows (own and ghost leaves, padded), each entry from the user's index; X, the own
      // rows in the order of local_indices, is read from it.
      dense<T> Om = dense<T>::Zero(rows_om, cols);
#pragma omp parallel for schedule(static)
      for (int v = 0; v < cols; ++v)
        for (int t = 0; t < nodes; ++t) {
          const int node = first_leaf + d.global(t);
          for (int i = 0; i < tree.size(node); ++i)
            Om(std::int64_t(t) * m_ + i, v) = random_entry<T>(distribution::normal, cs, 0, std::uint64_t(v),
                                                              std::int64_t(tree.perm[std::size_t(tree.begin[node] + i)]));
        }
      upload_2d(c, std::size_t(rows_om), std::size_t(cols), Om.data(), std::size_t(rows_om),
                omega_.data() + std::int64_t(s_ + j) * rows_om, std::size_t(rows_om));
      auto Xm = matrix<T, Space>::uninitialized(local_rows, cols, ctx_);
      if (own > 0)
        scatter_rows(c, A_.padded_to_local.data(), std::int64_t(own) * m_, omega_.data() + std::int64_t(s_ + j) * rows_om, rows_om,
                     Xm.data(), std::max<index>(local_rows, 1), cols);
      auto Y = matrix<T, Space>::uninitialized(local_rows, cols, ctx_);
      M_.apply(op::none, Xm.view(), Y.view());
      double energy = Y.size() ? sum_of_squares(c, Y.data(), std::size_t(Y.size())) : 0.0;
      comm_.sum_in_rank_order(&energy, 1);
      require<non_finite_value>(std::isfinite(energy), "hara: the operator's products are not finite");
      energy_ += energy, columns_ += cols;
      if (own > 0)
        gather_rows(c, A_.padded_to_local.data(), std::int64_t(own) * m_, Y.data(), std::max<index>(local_rows, 1),
                    y_.data() + std::int64_t(s_ + j) * rows_y, rows_y, cols);
      c.synchronize();
    }
    s_ = s;
    norm_ = std::sqrt(energy_ / std::max(columns_, 1));
    d.nr.assign(std::size_t(nodes), 0);
    for (int t = 0; t < nodes; ++t) d.nr[t] = leaf_[std::size_t(d.global(t))];
    d.ld = m_;
  }

  panel samples(int l, bool omega) {
    const auto& d = lv_[l];
    panel p;
    p.at.resize(std::size_t(d.nodes()));
    if (l == L_) {
      p.base = const_cast<T*>((omega ? omega_ : y_).data());
      p.ld = int(std::int64_t(std::max(omega ? d.nodes() : d.own, 1)) * m_);
      for (int t = 0; t < d.nodes(); ++t) p.at[t] = std::int64_t(t) * m_;
    } else {
      p.base = const_cast<T*>((omega ? d.om : d.y).data());
      p.ld = d.ld;
      for (int t = 0; t < d.nodes(); ++t) p.at[t] = std::int64_t(t) * s_ * d.ld;
    }
    return p;
  }

  void near_layout(int l) {
    auto& d = lv_[l];
    d.wr.assign(std::size_t(d.own), 0), d.offr.assign(d.f.col.size(), 0);
    d.nearw = 1;
    for (int t = 0; t < d.own; ++t) {
      for (int e = d.f.ptr[t]; e < d.f.ptr[t + 1]; ++e) d.offr[e] = d.wr[t], d.wr[t] += d.nr[std::size_t(d.f.col[e])];
      d.nearw = std::max(d.nearw, d.wr[t]);
    }
  }

  struct test_matrix {
    buffer<T, Space> r, rows, unit;
    int w = 0;
  };
  test_matrix draw_test_matrix(int l, const level_data& d, const panel& om) {
    const int nodes = d.nodes(), ld = d.ld, s = s_, wd = std::min(d.width(), s);
    test_matrix m{buffer<T, Space>(ctx_, std::size_t(s) * wd), buffer<T, Space>(ctx_, std::size_t(nodes) * ld * wd), {}, wd};
    fill_random(*ctx_, distribution::normal, s, wd, m.r.data(), s,
                splitmix64(p_.seed ^ (0x6a09e667f3bcc909ull * std::uint64_t(1 + l + 256 * s))));
    buffer<T, Space> f(ctx_, std::size_t(wd) * wd);
    qr_items(ctx_, m.r.data(), {0}, {s}, {wd}, s, f.data(), {0}, wd);
    std::vector<item_gemm> items;
    for (int c = 0; c < nodes; ++c) items.push_back({d.nr[c], wd, s, om.at[c], 0, std::int64_t(c) * ld * wd, om.ld, s, ld});
    gemm_items(ctx_, op::none, op::none, T(1), om.base, m.r.data(), T(0), m.rows.data(), items);
    std::vector<T> unit(std::size_t(wd) * wd, T(0));
    for (int j = 0; j < wd; ++j) unit[std::size_t(j) * (wd + 1)] = T(1) + T(1024) * std::numeric_limits<T>::epsilon();
    m.unit = buffer<T, Space>(ctx_, unit);
    return m;
  }

  // G = Y Omega_N^+ for the own nodes and, with `basis`, their basis samples, SVDs and held-out
  // estimates (one_sample_set_builder::project and basis_samples, on local numbering).
  void project(int l, level_data& d, buffer<T, Space>& g, bool basis, std::vector<double>* check) {
    const auto& f = d.f;
    const panel om = samples(l, true), y = samples(l, false);
    const int nodes = d.own, all = d.nodes(), ld = d.ld, nw = d.nearw, s = s_, wd = d.width(), p = d.p;
    const std::int64_t gs = std::int64_t(nw) * nw, ps = std::int64_t(ld) * ld;
    g = buffer<T, Space>(ctx_, std::size_t(std::max(nodes, 1)) * ld * nw);
    fill(*ctx_, g.data(), g.size(), T(0));
    test_matrix r;
    if (basis) {
      d.u = buffer<T, Space>(ctx_, std::size_t(std::max(all, 1)) * d.basis_stride());
      fill(*ctx_, d.u.data(), d.u.size(), T(0));
      check->assign(std::size_t(nodes) * (ld + 1), 0.0);
      r = draw_test_matrix(l, d, om);
    }
    const std::size_t per_node = std::size_t(gs) + (basis ? 2 * std::size_t(nw) * wd + std::size_t(wd) * wd : 0);
    const int batch = int(std::clamp<std::size_t>((std::size_t(256) << 20) / sizeof(T) / per_node, 1, std::max(nodes, 1)));
    const std::size_t pair_budget = (std::size_t(512) << 20) / sizeof(T) / std::size_t(ps);
    const auto key = [all](int a, int b) { return std::int64_t(std::max(a, b)) * all + std::min(a, b); };
    std::unordered_map<std::int64_t, std::int64_t> slot;
    for (int u0 = 0, u1 = 0; u0 < nodes; u0 = u1) {
      slot.clear();
      std::vector<item_gemm> pairs;
      for (u1 = u0; u1 < nodes; ++u1) {
        std::vector<std::int64_t> fresh;
        for (int e1 = f.ptr[u1]; e1 < f.ptr[u1 + 1]; ++e1)
          for (int e2 = f.ptr[u1]; e2 <= e1; ++e2) {
            const std::int64_t k = key(f.col[e1], f.col[e2]);
            if (!slot.count(k) && std::find(fresh.begin(), fresh.end(), k) == fresh.end()) fresh.push_back(k);
          }
        if (u1 > u0 && slot.size() + fresh.size() > pair_budget) break;
        for (const std::int64_t k : fresh) {
          const int a = int(k / all), b = int(k % all);
          const std::int64_t at = std::int64_t(slot.size()) * ps;
          slot.emplace(k, at);
          pairs.push_back({d.nr[a], d.nr[b], s, om.at[a], om.at[b], at, om.ld, om.ld, ld});
        }
      }
      buffer<T, Space> pb(ctx_, std::max<std::size_t>(slot.size(), 1) * std::size_t(ps));
      gemm_items(ctx_, op::none, op::transpose, T(1), om.base, om.base, T(0), pb.data(), pairs);
      for (int t0 = u0; t0 < u1; t0 += batch) {
        const int t1 = std::min(u1, t0 + batch), cnt = t1 - t0;
        buffer<T, Space> a(ctx_, std::size_t(cnt) * gs);
        std::vector<item_copy> kn, kt;
        std::vector<item_gemm> yq;
        std::vector<item_trsm> solve;
        std::vector<int> an;
        std::vector<std::int64_t> ao;
        for (int t = t0; t < t1; ++t) {
          const std::int64_t at = (t - t0) * gs;
          for (int e1 = f.ptr[t]; e1 < f.ptr[t + 1]; ++e1) {
            const int c1 = f.col[e1];
            for (int e2 = f.ptr[t]; e2 <= e1; ++e2) {
              const int c2 = f.col[e2];
              (c1 >= c2 ? kn : kt)
                  .push_back({d.nr[c1], d.nr[c2], slot.at(key(c1, c2)), at + d.offr[e1] + std::int64_t(d.offr[e2]) * nw, ld, nw});
            }
            yq.push_back({d.nr[t], d.nr[c1], s, y.at[t], om.at[c1], d.row_block(t) + std::int64_t(d.offr[e1]) * ld, y.ld, om.ld, ld});
          }
          if (d.wr[t] > 0) an.push_back(d.wr[t]), ao.push_back(at);
          solve.push_back({d.nr[t], d.wr[t], at, d.row_block(t), nw, ld});
        }
        copy_items(ctx_, pb.data(), a.data(), kn);
        copy_items(ctx_, pb.data(), a.data(), kt, op::transpose);
        const int bad = potrf_items(ctx_, a.data(), ao, an, nw);
        if (bad >= 0)
          throw numerical_failure("h2expr: hara: level " + std::to_string(l) + ": the samples of a near field (" +
                                  std::to_string(an[bad]) + " rows) are numerically dependent");
        gemm_items(ctx_, op::none, op::transpose, T(1), y.base, om.base, T(0), g.data(), yq);
        trsm_items(ctx_, side::right, uplo::lower, op::transpose, diag::non_unit, T(1), a.data(), g.data(), solve);
        trsm_items(ctx_, side::right, uplo::lower, op::none, diag::non_unit, T(1), a.data(), g.data(), solve);
        if (basis) basis_samples(l, d, r, a, g, t0, t1, y, *check, p, wd);
      }
    }
    ctx_->synchronize();
  }

  void basis_samples(int l, level_data& d, const test_matrix& r, const buffer<T, Space>& a, const buffer<T, Space>& g, int t0,
                     int t1, const panel& y, std::vector<double>& check, int p, int wd) {
    const auto& f = d.f;
    const int cnt = t1 - t0, ld = d.ld, s = s_, nw = d.nearw;
    const std::int64_t gs = std::int64_t(nw) * nw, ss = std::int64_t(nw) * wd, cw = std::int64_t(wd) * wd;
    buffer<T, Space> S(ctx_, std::size_t(cnt) * ss), X(ctx_, std::size_t(cnt) * ss), C(ctx_, std::size_t(cnt) * cw);
    std::vector<int> w(cnt), cn;
    std::vector<std::int64_t> co;
    std::vector<item_copy> stack, rtr;
    std::vector<item_gemm> xx, yr, gsw;
    std::vector<item_trsm> lx, wc;
    for (int t = t0; t < t1; ++t) {
      const int i = t - t0, nin = d.wr[t], nout = d.nr[t];
      w[i] = nout > 0 ? std::min(s - nin, nout + p) : 0;
      if (w[i] <= 0) continue;
      for (int e = f.ptr[t]; e < f.ptr[t + 1]; ++e)
        stack.push_back({d.nr[f.col[e]], w[i], std::int64_t(f.col[e]) * ld * r.w, i * ss + d.offr[e], ld, nw});
      lx.push_back({nin, w[i], i * gs, i * ss, nw, nw});
      rtr.push_back({w[i], w[i], 0, i * cw, r.w, wd});
      xx.push_back({w[i], w[i], nin, i * ss, i * ss, i * cw, nw, nw, wd});
      cn.push_back(w[i]), co.push_back(i * cw);
      yr.push_back({nout, w[i], s, y.at[t], 0, d.basis_at(t), y.ld, s, ld});
      gsw.push_back({nout, w[i], nin, d.row_block(t), i * ss, d.basis_at(t), ld, nw, ld});
      wc.push_back({nout, w[i], i * cw, d.basis_at(t), wd, ld});
    }
    copy_items(ctx_, r.rows.data(), S.data(), stack);
    copy_items(ctx_, r.rows.data(), X.data(), stack);
    trsm_items(ctx_, side::left, uplo::lower, op::none, diag::non_unit, T(1), a.data(), X.data(), lx);
    copy_items(ctx_, r.unit.data(), C.data(), rtr);
    gemm_items(ctx_, op::transpose, op::none, T(-1), X.data(), X.data(), T(1), C.data(), xx);
    const int bad = potrf_items(ctx_, C.data(), co, cn, wd);
    if (bad >= 0)
      throw numerical_failure("h2expr: hara: level " + std::to_string(l) + ": the test columns of a node's far field (" +
                              std::to_string(cn[bad]) + ") are numerically dependent");
    gemm_items(ctx_, op::none, op::none, T(1), y.base, r.r.data(), T(0), d.u.data(), yr);
    gemm_items(ctx_, op::none, op::none, T(-1), g.data(), S.data(), T(1), d.u.data(), gsw);
    trsm_items(ctx_, side::right, uplo::lower, op::transpose, diag::non_unit, T(1), C.data(), d.u.data(), wc);
    std::vector<int> sm, sn, sld;
    std::vector<std::int64_t> so, sv;
    buffer<T, Space> sigma(ctx_, std::size_t(cnt) * ld);
    for (int t = t0; t < t1; ++t)
      if (w[t - t0] > p)
        sm.push_back(d.nr[t]), sn.push_back(w[t - t0] - p), sld.push_back(ld), so.push_back(d.basis_at(t)),
            sv.push_back(std::int64_t(t - t0) * ld);
    if (!so.empty()) {
      const int k = int(so.size());
      buffer<int, Space> sz(ctx_, concatenate<int>({sm, sn, sld}));
      auto pa = pointers(ctx_, d.u.data(), so), pss = pointers(ctx_, sigma.data(), sv);
      svd_vbatched(*ctx_, sz.data(), sz.data() + k, pa.data(), sz.data() + 2 * k, pss.data(), (T* const*)nullptr,
                   (const int*)nullptr, k, *std::max_element(sm.begin(), sm.end()), *std::max_element(sn.begin(), sn.end()));
      ctx_->synchronize();
    }
    const int cs = ld + p;
    buffer<T, Space> c(ctx_, std::size_t(cnt) * cs * p);
    fill(*ctx_, c.data(), c.size(), T(0));
    std::vector<item_gemm> uw, rw, ww;
    for (int t = t0; t < t1; ++t) {
      const int i = t - t0;
      if (w[i] <= p) continue;
      const int u = std::min(d.nr[t], w[i] - p);
      const std::int64_t w2 = d.basis_at(t) + std::int64_t(w[i] - p) * ld, ct = std::int64_t(i) * cs * p;
      uw.push_back({u, p, d.nr[t], d.basis_at(t), w2, ct, ld, ld, ld});
      rw.push_back({d.nr[t], p, u, d.basis_at(t), ct, w2, ld, ld, ld});
      ww.push_back({p, p, d.nr[t], w2, w2, ct + std::int64_t(ld) * p, ld, ld, p});
    }
    gemm_items(ctx_, op::transpose, op::none, T(1), d.u.data(), d.u.data(), T(0), c.data(), uw);
    gemm_items(ctx_, op::none, op::none, T(-1), d.u.data(), c.data(), T(1), d.u.data(), rw);
    gemm_items(ctx_, op::transpose, op::none, T(1), d.u.data(), d.u.data(), T(0), c.data(), ww);
    const auto ch = c.to_host();
    for (int t = t0; t < t1; ++t) {
      const int i = t - t0;
      if (w[i] <= p) continue;
      const T* ct = ch.data() + std::size_t(i) * cs * p;
      double rest = 0;
      for (int j = 0; j < p; ++j) rest += double(ct[std::size_t(ld) * p + j * p + j]);
      const int u = std::min(d.nr[t], w[i] - p);
      double* e = check.data() + std::size_t(t) * (ld + 1);
      for (int k = ld; k >= 0; --k) {
        e[k] = rest / p;
        if (k >= 1 && k <= u)
          for (int j = 0; j < p; ++j) rest += double(ct[std::size_t(j) * ld + k - 1]) * double(ct[std::size_t(j) * ld + k - 1]);
      }
    }
  }

  // Own node ranks (one_sample_set_builder::ranks; `live` over every rank); the samples the level needs.
  int ranks(int l, const std::vector<double>& check, int live) {
    auto& d = lv_[l];
    const int ld = d.ld, p = p_.converge_samples;
    const double e = 0.5 * p_.tol * norm_, rho = 0.5;
    const double shares = (1 - std::pow(rho, L_)) / (1 - rho);
    const double allowed = e * e / 2 * std::pow(rho, l - 1) / shares / std::max(live, 1);
    d.ku.assign(std::size_t(d.nodes()), 0);
    int need = 0;
    for (int t = 0; t < d.own; ++t) {
      const int nin = d.wr[t], nout = d.nr[t];
      if (nout == 0) continue;
      const int w = std::min(s_ - nin, nout + p), usable = std::min(nout, w - p);
      const double budget = allowed / (1 + double(nin) / std::max(s_ - nin - 1, 1));
      const double* err = check.data() + std::size_t(t) * (ld + 1);
      int keep = 0;
      while (keep < usable && err[keep] > budget) ++keep;
      if (err[keep] > budget && keep < nout) {
        need = std::max(need, s_ + p_.block_size);
        continue;
      }
      if (keep > cap_)
        throw rank_cap_reached("h2expr: hara: level " + std::to_string(l) + ": node " + std::to_string(d.global(t)) +
                               " needs rank " + std::to_string(keep) + " > max_rank " + std::to_string(cap_) +
                               " for tol = " + std::to_string(p_.tol) + "; raise hara_options::max_rank");
      d.ku[t] = keep;
    }
    return need;
  }

  // Every node's rank at level l (ku_[l], global), from the own nodes' (the ghosts' then read from it).
  void share_ranks(int l) {
    auto& d = lv_[l];
    std::vector<std::int64_t> all(std::size_t(1) << l, 0);
    for (int t = 0; t < d.own; ++t) all[std::size_t(d.global(t))] = d.ku[t];
    if (!d.top) comm_.max(all);
    ku_[l].assign(all.begin(), all.end());
    for (int t = d.own; t < d.nodes(); ++t) d.ku[t] = ku_[l][std::size_t(d.global(t))];
  }

  // The level's bases and near blocks, and the parents' compressed samples; what ranks() returns.
  int level(int l) {
    auto& d = lv_[l];
    d.p = p_.converge_samples;
    if (l < L_) {  // rows: the children's ranks
      d.nr.assign(std::size_t(d.nodes()), 0);
      for (int t = 0; t < d.nodes(); ++t) {
        const int g = d.global(t);
        d.nr[t] = ku_[l + 1][std::size_t(2 * g)] + ku_[l + 1][std::size_t(2 * g + 1)];
      }
      int ld = 1;
      for (int g = 0; g < (1 << l); ++g) ld = std::max(ld, ku_[l + 1][std::size_t(2 * g)] + ku_[l + 1][std::size_t(2 * g + 1)]);
      require(ld == d.ld, "distributed hara: the compressed samples' layout");  // set by compress_samples
    }
    near_layout(l);
    int more = 0;
    for (int t = 0; t < d.own; ++t) more = std::max(more, short_of(d.wr[t]));
    if ((more = largest(more))) return more;
    int live = 0;
    for (int t = 0; t < d.own; ++t) live += d.nr[t] > 0;
    if (!d.top) {
      std::int64_t lv = live;
      comm_.sum_in_rank_order(&lv, 1);
      live = int(lv);
    }
    buffer<T, Space> g;
    std::vector<double> check;
    int need = 0;
    agree(rank_failure::of([&] {
      project(l, d, g, true, &check);
      need = ranks(l, check, live);
    }));
    if ((need = largest(need))) return need;
    share_ranks(l);

    // The neighbours' bases of the shared nodes and their G blocks of the shared pairs.
    if (!d.top) {
      std::vector<message<T, Space>> out, in;
      auto blocks_of = [&](std::size_t i, std::vector<block_ref>& su, std::vector<block_ref>& sg, std::vector<block_ref>& ru,
                           std::vector<block_ref>& rg) {
        for (int t : d.send_nodes[i]) su.push_back({d.nr[t], d.ku[t], d.basis_at(t), d.ld});
        for (int e : d.send_pairs[i]) {
          const int t = row_of(d, e);
          sg.push_back({d.nr[t], d.nr[d.f.col[e]], d.row_block(t) + std::int64_t(d.offr[e]) * d.ld, d.ld});
        }
        for (int t : d.recv_nodes[i]) ru.push_back({d.nr[t], d.ku[t], d.basis_at(t), d.ld});
        for (int e : d.recv_pairs[i]) rg.push_back({d.nr[d.f.col[e]], d.nr[row_of(d, e)], d.pair(d.slot[e]), d.ld});
      };
      for (std::size_t i = 0; i < d.peers.size(); ++i) {
        std::vector<block_ref> su, sg, ru, rg;
        blocks_of(i, su, sg, ru, rg);
        out.push_back(pack({{d.u.data(), &su}, {g.data(), &sg}}));
        in.emplace_back(ctx_, std::size_t(values(ru) + values(rg)));
      }
      swap(d, out, in);
      d.rg = buffer<T, Space>(ctx_, std::size_t(std::max(d.remote, 1)) * d.ld * d.ld);
      fill(*ctx_, d.rg.data(), d.rg.size(), T(0));
      for (std::size_t i = 0; i < d.peers.size(); ++i) {
        std::vector<block_ref> su, sg, ru, rg;
        blocks_of(i, su, sg, ru, rg);
        unpack(in[i], d.u.data(), ru);
        unpack(in[i], d.rg.data(), rg, values(ru));
      }
      ctx_->synchronize();
    }

    // Per own near pair (t, s): D = G_ts + U_t E, E = U_t^T H_st^T - U_t^T G_ts - (U_t^T H_st^T V_s) V_s^T,
    // H_st: G_s's block of t (here, or received).
    const int ld = d.ld;
    const int pairs = int(d.f.col.size());
    buffer<T, Space> e(ctx_, std::size_t(std::max(pairs, 1)) * ld * ld), x(ctx_, std::size_t(std::max(pairs, 1)) * ld * ld);
    d.d = buffer<T, Space>(ctx_, std::size_t(std::max(pairs, 1)) * ld * ld);
    fill(*ctx_, d.d.data(), d.d.size(), T(0));
    {
      std::vector<item_gemm> e1_here, e1_there, x1, e2, e3, d1;
      std::vector<item_copy> dg;
      for (int t = 0; t < d.own; ++t)
        for (int q = d.f.ptr[t]; q < d.f.ptr[t + 1]; ++q) {
          const int c = d.f.col[q], nr = d.nr[t], nc = d.nr[c], ku = d.ku[t], kv = d.ku[c];
          const std::int64_t b = d.pair(q), ut = d.basis_at(t), vc = d.basis_at(c);
          const std::int64_t gts = d.row_block(t) + std::int64_t(d.offr[q]) * ld;
          if (d.f.mirror[q] >= 0)
            e1_here.push_back({ku, nc, nr, ut, d.row_block(c) + std::int64_t(d.offr[d.f.mirror[q]]) * ld, b, ld, ld, ld});
          else
            e1_there.push_back({ku, nc, nr, ut, d.pair(d.slot[q]), b, ld, ld, ld});
          x1.push_back({ku, kv, nc, b, vc, b, ld, ld, ld});
          e2.push_back({ku, nc, nr, ut, gts, b, ld, ld, ld});
          e3.push_back({ku, nc, kv, b, vc, b, ld, ld, ld});
          dg.push_back({nr, nc, gts, b, ld, ld});
          d1.push_back({nr, nc, ku, ut, b, b, ld, ld, ld});
        }
      const T* u = d.u.data();
      gemm_items(ctx_, op::transpose, op::transpose, T(1), u, g.data(), T(0), e.data(), e1_here);
      gemm_items(ctx_, op::transpose, op::transpose, T(1), u, d.rg.data(), T(0), e.data(), e1_there);
      gemm_items(ctx_, op::none, op::none, T(1), e.data(), u, T(0), x.data(), x1);
      gemm_items(ctx_, op::transpose, op::none, T(-1), u, g.data(), T(1), e.data(), e2);
      gemm_items(ctx_, op::none, op::transpose, T(-1), x.data(), u, T(1), e.data(), e3);
      copy_items(ctx_, g.data(), d.d.data(), dg);
      gemm_items(ctx_, op::none, op::none, T(1), u, e.data(), T(1), d.d.data(), d1);
      ctx_->synchronize();
    }
    g = buffer<T, Space>(), e = buffer<T, Space>(), x = buffer<T, Space>(), d.rg = buffer<T, Space>();
    symmetrize(l);
    compress_samples(l);
    return 0;
  }

  static int row_of(const level_data& d, int e) {
    return int(std::upper_bound(d.f.ptr.begin(), d.f.ptr.end(), e) - d.f.ptr.begin()) - 1;
  }

  // D_ts := (D_ts + D_st^T) / 2, D_st here or from its row's rank.
  void symmetrize(int l) {
    auto& d = lv_[l];
    const int ld = d.ld;
    if (!d.top && !d.peers.empty()) {
      std::vector<message<T, Space>> out, in;
      for (std::size_t i = 0; i < d.peers.size(); ++i) {
        std::vector<block_ref> send, receive;
        for (int e : d.send_pairs[i]) send.push_back({d.nr[row_of(d, e)], d.nr[d.f.col[e]], d.pair(e), ld});
        for (int e : d.recv_pairs[i]) receive.push_back({d.nr[d.f.col[e]], d.nr[row_of(d, e)], d.pair(d.slot[e]), ld});
        out.push_back(pack(d.d.data(), send));
        in.emplace_back(ctx_, std::size_t(values(receive)));
      }
      swap(d, out, in);
      d.rd = buffer<T, Space>(ctx_, std::size_t(std::max(d.remote, 1)) * ld * ld);
      fill(*ctx_, d.rd.data(), d.rd.size(), T(0));
      for (std::size_t i = 0; i < d.peers.size(); ++i) {
        std::vector<block_ref> receive;
        for (int e : d.recv_pairs[i]) receive.push_back({d.nr[d.f.col[e]], d.nr[row_of(d, e)], d.pair(d.slot[e]), ld});
        unpack(in[i], d.rd.data(), receive);
      }
    }
    buffer<T, Space> tr(ctx_, d.d.size());
    fill(*ctx_, tr.data(), tr.size(), T(0));
    std::vector<item_copy> here, there;
    for (int t = 0; t < d.own; ++t)
      for (int q = d.f.ptr[t]; q < d.f.ptr[t + 1]; ++q) {
        const int c = d.f.col[q];
        if (d.f.mirror[q] >= 0) here.push_back({d.nr[t], d.nr[c], d.pair(d.f.mirror[q]), d.pair(q), ld, ld});
        else there.push_back({d.nr[t], d.nr[c], d.pair(d.slot[q]), d.pair(q), ld, ld});
      }
    copy_items(ctx_, d.d.data(), tr.data(), here, op::transpose);
    if (!there.empty()) copy_items(ctx_, d.rd.data(), tr.data(), there, op::transpose);
    if (d.d.size()) axpby_2d(*ctx_, d.d.size(), 1, T(0.5), tr.data(), d.d.size(), T(0.5), d.d.data(), d.d.size());
    ctx_->synchronize();
    d.rd = buffer<T, Space>();
  }

  // The parent level's samples: Omega^ = U^T Omega, Y^ = U^T (Y - sum_s D_ts Omega_s), each child's rows
  // after its sibling's. Below the C-level into the own parents (then the ghosts' from their ranks);
  // from the C-level into every top node's, summed over the ranks.
  void compress_samples(int l) {
    auto& d = lv_[l];
    auto& up = lv_[l - 1];
    const int s = s_, ld = d.ld;
    int upld = 1;
    for (int g = 0; g < (1 << (l - 1)); ++g) upld = std::max(upld, ku_[l][std::size_t(2 * g)] + ku_[l][std::size_t(2 * g + 1)]);
    up.ld = upld;
    const std::int64_t ups = std::int64_t(s) * up.ld;
    up.om = buffer<T, Space>(ctx_, std::size_t(std::max(up.nodes(), 1)) * ups);
    up.y = buffer<T, Space>(ctx_, std::size_t(std::max(up.nodes(), 1)) * ups);
    fill(*ctx_, up.om.data(), up.om.size(), T(0));
    fill(*ctx_, up.y.data(), up.y.size(), T(0));
    const panel in = samples(l, true), out = samples(l, false);
    int most = 0;
    for (int t = 0; t < d.own; ++t) most = std::max(most, d.f.ptr[t + 1] - d.f.ptr[t]);
    buffer<T, Space> e(ctx_, std::size_t(std::max<std::size_t>(d.f.col.size(), 1)) * ld * ld);
    std::vector<item_gemm> hin, hout, be;
    auto parent_at = [&](int t) {  // the own child t's block in the parent panels
      const int g = d.global(t), j = g / 2;
      const int row = (g & 1) ? ku_[l][std::size_t(g - 1)] : 0;
      return std::int64_t(local(l - 1, j)) * ups + row;
    };
    for (int t = 0; t < d.own; ++t) {
      const std::int64_t at = parent_at(t);
      hin.push_back({d.ku[t], s, d.nr[t], d.basis_at(t), in.at[t], at, ld, in.ld, up.ld});
      hout.push_back({d.ku[t], s, d.nr[t], d.basis_at(t), out.at[t], at, ld, out.ld, up.ld});
      for (int q = d.f.ptr[t]; q < d.f.ptr[t + 1]; ++q)
        be.push_back({d.ku[t], d.nr[d.f.col[q]], d.nr[t], d.basis_at(t), d.pair(q), d.pair(q), ld, ld, ld});
    }
    gemm_items(ctx_, op::transpose, op::none, T(1), d.u.data(), in.base, T(0), up.om.data(), hin);
    gemm_items(ctx_, op::transpose, op::none, T(1), d.u.data(), out.base, T(0), up.y.data(), hout);
    gemm_items(ctx_, op::transpose, op::none, T(1), d.u.data(), d.d.data(), T(0), e.data(), be);
    for (int j = 0; j < most; ++j) {
      std::vector<item_gemm> es;
      for (int t = 0; t < d.own; ++t) {
        if (d.f.ptr[t] + j >= d.f.ptr[t + 1]) continue;
        const int q = d.f.ptr[t] + j, c = d.f.col[q];
        es.push_back({d.ku[t], s, d.nr[c], d.pair(q), in.at[c], parent_at(t), ld, in.ld, up.ld});
      }
      gemm_items(ctx_, op::none, op::none, T(-1), e.data(), in.base, T(1), up.y.data(), es);
    }
    ctx_->synchronize();
    if (up.top && !d.top) {  // the C-level's into the top: every row from one rank, the rest zero
      sum_over_ranks(up.om), sum_over_ranks(up.y);
    } else if (!up.top) {  // the ghosts' compressed samples (their Omega^ alone is read here)
      std::vector<message<T, Space>> outm, inm;
      for (std::size_t i = 0; i < up.peers.size(); ++i) {
        std::vector<block_ref> send, receive;
        for (int t : up.send_nodes[i]) send.push_back({nr_of(l - 1, t), s, std::int64_t(t) * ups, up.ld});
        for (int t : up.recv_nodes[i]) receive.push_back({nr_of(l - 1, t), s, std::int64_t(t) * ups, up.ld});
        outm.push_back(pack(up.om.data(), send));
        inm.emplace_back(ctx_, std::size_t(values(receive)));
      }
      swap(up, outm, inm);
      for (std::size_t i = 0; i < up.peers.size(); ++i) {
        std::vector<block_ref> receive;
        for (int t : up.recv_nodes[i]) receive.push_back({nr_of(l - 1, t), s, std::int64_t(t) * ups, up.ld});
        unpack(inm[i], up.om.data(), receive);
      }
      ctx_->synchronize();
    }
  }
  int nr_of(int l, int t) const {  // rows of local node t of level l < L: its children's ranks
    const int g = lv_[l].global(t);
    return ku_[l + 1][std::size_t(2 * g)] + ku_[l + 1][std::size_t(2 * g + 1)];
  }

  void sum_over_ranks(buffer<T, Space>& b) {
    message<T, Space> m(ctx_, b.size());
    if (b.size()) copy(*ctx_, b.data(), m.data(), b.size());
    ctx_->synchronize();
    m.before_send();
    require(b.size() <= std::size_t(INT32_MAX), "distributed hara: the top's samples pass 2^31 - 1 values");
    // Exact in any order: every entry has one nonzero term.
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, m.mpi(), int(b.size()), mpi_type<T>(), MPI_SUM, comm_.get()), "MPI_Allreduce");
    m.after_receive();
    if (b.size()) copy(*ctx_, m.data(), b.data(), b.size());
  }

  // From the leaves up; 0 when every node had samples enough, else how many the first short level asks for.
  int build() {
    for (int l = L_; l >= 1; --l)
      if (const int need = level(l)) return need;
    return root();
  }

  int root() {
    auto& d = lv_[0];
    d.nr.assign(std::size_t(d.nodes()), 0);
    for (int t = 0; t < d.nodes(); ++t) d.nr[t] = nr_of(0, t);
    d.ld = std::max(1, ku_[1][0] + ku_[1][1]);
    near_layout(0);
    int more = 0;
    for (int t = 0; t < d.own; ++t) more = std::max(more, short_of(d.nr[t]));
    if ((more = largest(more))) return more;
    ku_[0].assign(1, 0);
    d.ku.assign(std::size_t(d.nodes()), 0);
    buffer<T, Space> g;
    agree(rank_failure::of([&] {
      if (d.own > 0) project(0, d, g, false, nullptr);
    }));
    d.d = std::move(g);  // node 0's block is pair 0's (nearw == its rows, ld of them)
    if (d.own > 0) symmetrize(0);
    return 0;
  }

  // The distributed matrix: bases from U, top-down the near pairs' cores split into the children's
  // coupling blocks and cores, dense leaves D + U C V^T; uniform ranks per level (zero columns past a
  // node's), the layout of the operator's matrix.
  distributed_data<T, Space> assemble() {
    distributed_data<T, Space> H;
    H.comm = A_.comm, H.dist = D_, H.ctx = ctx_, H.structure = A_.structure, H.m_max = m_, H.symmetric = true;
    H.top_level = A_.top_level;
    const auto& blocks = A_.structure.blocks();
    for (int l = 0; l < c_; ++l) H.top_arrays.emplace_back(ctx_, blocks.coupling[l]);
    H.split_host = A_.split_host;
    for (const auto& sp : H.split_host) H.splits.emplace_back(ctx_, sp);
    H.peers = A_.peers;
    H.padded_to_local = clone(A_.padded_to_local);
    H.local_indices = A_.local_indices;
    std::vector<int> r(std::size_t(L_) + 1, 0);
    for (int l = 1; l <= L_; ++l) r[l] = *std::max_element(ku_[l].begin(), ku_[l].end());
    H.rank = r;
    const int S = D_.slots();
    for (int s = 0; s < S; ++s) H.unit.push_back(s == S - 1 ? m_ : r[c_ + s]);

    // Bases.
    auto basis = std::make_shared<basis_share<T, Space>>();
    basis->orthonormal = true;
    {
      const auto& d = lv_[L_];
      basis->leaves = buffer<T, Space>(ctx_, std::size_t(d.own) * m_ * r[L_]);
      fill(*ctx_, basis->leaves.data(), basis->leaves.size(), T(0));
      std::vector<item_copy> items;
      for (int t = 0; t < d.own; ++t) items.push_back({d.nr[t], d.ku[t], d.basis_at(t), std::int64_t(t) * m_ * r[L_], d.ld, m_});
      copy_items(ctx_, d.u.data(), basis->leaves.data(), items);
    }
    basis->transfers.resize(std::size_t(L_) + 1);
    for (int l = 1; l <= L_; ++l) {
      const auto& pd = lv_[l - 1];
      const int parents = pd.own, rc = r[l], rp = r[l - 1];
      basis->transfers[l] = buffer<T, Space>(ctx_, std::size_t(parents) * 2 * rc * rp);
      fill(*ctx_, basis->transfers[l].data(), basis->transfers[l].size(), T(0));
      if (l == 1 || rc == 0 || rp == 0) continue;  // the root has no basis
      std::vector<item_copy> items;
      for (int j = 0; j < parents; ++j) {
        const int g = pd.global(j), k0 = ku_[l][std::size_t(2 * g)], k1 = ku_[l][std::size_t(2 * g + 1)], kp = pd.ku[j];
        const std::int64_t at = std::int64_t(j) * 2 * rc * rp;
        items.push_back({k0, kp, pd.basis_at(j), at, pd.ld, 2 * rc});
        items.push_back({k1, kp, pd.basis_at(j) + k0, at + rc, pd.ld, 2 * rc});
      }
      copy_items(ctx_, pd.u.data(), basis->transfers[l].data(), items);
    }
    H.row_basis = H.col_basis = basis;

    // Coupling blocks (ld r[l]) where they are stored: the top's by global index, the own rows' in
    // their split order.
    std::vector<std::vector<int>> position(static_cast<std::size_t>(S));
    for (int s = 0; s < S; ++s) {
      const auto& sp = H.split_host[s];
      const auto& lv = s == S - 1 ? blocks.dense : blocks.coupling[c_ + s];
      position[s].assign(std::size_t(lv.blocks()), -1);
      for (std::size_t i = 0; i < sp.diag_global.size(); ++i) position[s][std::size_t(sp.diag_global[i])] = int(i);
      for (std::size_t i = 0; i < sp.off_global.size(); ++i)
        position[s][std::size_t(sp.off_global[i])] = int(sp.diag_global.size() + i);
    }
    for (int l = 0; l < c_; ++l) {
      H.top_coupling.emplace_back(ctx_, std::size_t(blocks.coupling[l].blocks()) * r[l] * r[l]);
      fill(*ctx_, H.top_coupling.back().data(), H.top_coupling.back().size(), T(0));
    }
    for (int s = 0; s < S; ++s) {
      const std::int64_t u = H.unit[s];
      H.blocks.emplace_back(ctx_, std::size_t(H.split_host[s].diag.blocks() + H.split_host[s].off.blocks()) * u * u);
      fill(*ctx_, H.blocks.back().data(), H.blocks.back().size(), T(0));
    }
    std::vector<buffer<T, Space>> C(static_cast<std::size_t>(L_) + 1);
    for (int l = 1; l <= L_; ++l) {
      const auto& d = lv_[l];
      const auto& pd = lv_[l - 1];
      const auto& adm = blocks.coupling[l];
      C[l] = buffer<T, Space>(ctx_, std::max<std::size_t>(d.f.col.size(), 1) * d.ld * d.ld);
      fill(*ctx_, C[l].data(), C[l].size(), T(0));
      T* coupling = l < c_ ? H.top_coupling[l].data() : H.blocks[std::size_t(l - c_)].data();
      const int rl = std::max(r[l], 1);
      const std::int64_t ecs = std::int64_t(d.ld) * pd.ld;
      buffer<T, Space> ec(ctx_, std::max<std::size_t>(pd.f.col.size(), 1) * 2 * ecs);
      std::vector<item_gemm> g1, gc, gs;
      std::vector<item_copy> cc, cs;
      const auto& ku = ku_[l];
      const auto& kp = ku_[l - 1];
      for (int jl = 0; jl < pd.own; ++jl) {
        const int j = pd.global(jl);
        for (int q = pd.f.ptr[jl]; q < pd.f.ptr[jl + 1]; ++q) {
          const int il = pd.f.col[q], i = pd.global(il);
          for (int ha = 0; ha < 2; ++ha) {
            const int a = 2 * j + ha;
            if (!d.top && (a < d.b0 || a >= d.b0 + d.own)) continue;  // another rank's row (the C-level)
            const int al = a - d.b0, ro = ha ? ku[std::size_t(a - 1)] : 0;
            const std::int64_t et = (std::int64_t(q) * 2 + ha) * ecs;
            if (l > 1) g1.push_back({ku[std::size_t(a)], kp[std::size_t(i)], kp[std::size_t(j)], pd.basis_at(jl) + ro, pd.pair(q), et, pd.ld, pd.ld, d.ld});
            for (int hb = 0; hb < 2; ++hb) {
              const int b = 2 * i + hb, co = hb ? ku[std::size_t(b - 1)] : 0;
              const std::int64_t src = pd.pair(q) + ro + std::int64_t(co) * pd.ld;
              const int blk = int(std::find(adm.col.begin() + adm.row_ptr[a], adm.col.begin() + adm.row_ptr[a + 1], b) - adm.col.begin());
              std::int64_t dst;
              int ldd;
              bool is_coupling;
              if (blk < adm.row_ptr[a + 1]) {
                const std::int64_t at = l < c_ ? blk : position[std::size_t(l - c_)][std::size_t(blk)];
                require(at >= 0, "distributed hara: a coupling block outside this rank's rows");
                is_coupling = true, dst = at * rl * rl, ldd = rl;
              } else {
                const int e = d.f.find(al, local(l, b));
                if (e < 0) throw invalid_argument("hara: a block of the structure is neither admissible nor near");
                is_coupling = false, dst = d.pair(e), ldd = d.ld;
              }
              (is_coupling ? cs : cc).push_back({ku[std::size_t(a)], ku[std::size_t(b)], src, dst, pd.ld, ldd});
              if (l > 1)
                (is_coupling ? gs : gc).push_back({ku[std::size_t(a)], ku[std::size_t(b)], kp[std::size_t(i)], et, pd.basis_at(il) + co, dst, d.ld, pd.ld, ldd});
            }
          }
        }
      }
      copy_items(ctx_, pd.d.data(), C[l].data(), cc);
      copy_items(ctx_, pd.d.data(), coupling, cs);
      if (l > 1) {
        gemm_items(ctx_, op::none, op::none, T(1), pd.u.data(), C[l - 1].data(), T(0), ec.data(), g1);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pd.u.data(), T(1), C[l].data(), gc);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pd.u.data(), T(1), coupling, gs);
      }
      ctx_->synchronize();
    }
    // Dense leaves (the leaves' near pairs are the dense blocks, in their order): D + U C V^T.
    {
      const auto& d = lv_[L_];
      const int sd = S - 1;
      buffer<T, Space> uc(ctx_, std::max<std::size_t>(d.f.col.size(), 1) * d.ld * d.ld);
      std::vector<item_gemm> g1, g2;
      std::vector<item_copy> cd;
      for (int a = 0; a < d.own; ++a)
        for (int q = d.f.ptr[a]; q < d.f.ptr[a + 1]; ++q) {
          const int b = d.f.col[q];
          const int at = position[std::size_t(sd)][std::size_t(d.pair0 + q)];
          require(at >= 0, "distributed hara: a dense block outside this rank's rows");
          const std::int64_t e = std::int64_t(at) * m_ * m_;
          cd.push_back({d.nr[a], d.nr[b], d.pair(q), e, d.ld, m_});
          g1.push_back({d.nr[a], d.ku[b], d.ku[a], d.basis_at(a), d.pair(q), d.pair(q), d.ld, d.ld, d.ld});
          g2.push_back({d.nr[a], d.nr[b], d.ku[b], d.pair(q), d.basis_at(b), e, d.ld, d.ld, m_});
        }
      copy_items(ctx_, d.d.data(), H.blocks[std::size_t(sd)].data(), cd);
      gemm_items(ctx_, op::none, op::none, T(1), d.u.data(), C[L_].data(), T(0), uc.data(), g1);
      gemm_items(ctx_, op::none, op::transpose, T(1), uc.data(), d.u.data(), T(1), H.blocks[std::size_t(sd)].data(), g2);
      ctx_->synchronize();
    }
    build_peer_rows(H);
    return H;
  }

  const distributed::expression<T, Space>& M_;
  const distributed_data<T, Space>& A_;
  const communicator& comm_;
  const partition& D_;
  context_ptr<Space> ctx_;
  hara_parameters p_;
  std::vector<near_field> near_;
  int L_ = 0, c_ = 0, m_ = 1, cap_ = 512, s_ = 0;
  std::vector<int> leaf_;
  std::vector<level_data> lv_;
  std::vector<std::vector<int>> ku_;  // per level, every node's rank
  buffer<T, Space> omega_, y_;
  double norm_ = 0, energy_ = 0;
  int columns_ = 0;
  std::int64_t bytes_sent_ = 0, messages_sent_ = 0;
};

}  // namespace h2expr::detail

namespace h2expr {

// Collective: hara(M, tol) of a distributed operand (a distributed H2 matrix or an expression of them:
// A * A, A + B, ...), distributed like its first matrix, from the same samples, the same construction and
// the same final recompression as in one process (randomized/hara_one_sample_set.hpp), each rank on its
// share. Symmetric operators (A * A of a symmetric A, sums of symmetric ones): the construction of a
// general one (a second set of samples of M^T) is not distributed yet and raises invalid_argument.
// options.structure must be empty (the operand's is used); the report's levels are not filled (samples,
// norm_estimate and the seconds are).
template <distributed::operand E>
auto hara(const E& op, double tol, const hara_options<typename std::remove_cvref_t<decltype(distributed::as_expression(op))>::value_type>& o = {}) {
  const auto M = distributed::as_expression(op);
  using T = typename std::remove_cvref_t<decltype(M)>::value_type;
  using Space = typename std::remove_cvref_t<decltype(M)>::space;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto& A = M.layout();
  const auto& comm = *A.comm;
  detail::rank_failure bad;
  if (!(std::isfinite(tol) && tol > 0 && tol < 1))
    bad = {detail::rank_failure::tolerance, "hara: the tolerance must be in (0, 1), got " + std::to_string(tol)};
  else if (o.max_rank < 0)
    bad = {detail::rank_failure::invalid, "hara_options: max_rank must be >= 0 (got " + std::to_string(o.max_rank) + ")"};
  else if (o.block_size < 1 || o.block_size > 64)
    bad = {detail::rank_failure::invalid, "hara_options: block_size must be in 1..64 (got " + std::to_string(o.block_size) + ")"};
  else if (o.converge_samples < 1)
    bad = {detail::rank_failure::invalid, "hara_options: converge_samples must be >= 1 (got " + std::to_string(o.converge_samples) + ")"};
  else if (!o.structure.empty())
    bad = {detail::rank_failure::invalid, "distributed hara: options.structure must be empty (the operand's split is used)"};
  else if (!M.symmetric())
    bad = {detail::rank_failure::invalid, "distributed hara: the operator is not known to be symmetric (only symmetric "
                                          "operators are built on the ranks so far)"};
  comm.agree("distributed hara",
             {{"the tolerance", detail::bits_of(tol)}, {"max_rank", o.max_rank}, {"block_size", o.block_size},
              {"converge_samples", o.converge_samples}, {"the seed", std::int64_t(o.seed)}},
             bad);
  detail::distributed_hara_result_report built;
  detail::distributed_sample_builder<T, Space> builder(M, {tol, o.max_rank, o.block_size, o.converge_samples, o.seed});
  auto H = builder.run(built);
  // One recompression with the other half of the budget (hara's, randomized/hara_one_sample_set.hpp).
  const auto tc = clock::now();
  double harmonic = 0;
  for (int l = 1; l <= H.depth(); ++l) harmonic += 1.0 / l;
  const double e = 0.5 * tol * built.norm_estimate;
  compress_report crep;
  detail::distributed_recompress(H, detail::frobenius_share_over_ranks{e * e / std::max(harmonic, 1.0) / 2}, crep);
  distributed::h2_matrix<T, Space> P;
  detail::distributed_access::data(P) = std::move(H);
  const double compress_seconds = std::chrono::duration<double>(clock::now() - tc).count();
  if (o.report) {
    hara_report rep;
    rep.samples = built.samples;
    rep.norm_estimate = built.norm_estimate;
    rep.seconds_sampling = built.seconds_sampling;
    rep.seconds_ara = built.seconds_build;
    rep.seconds_compress = compress_seconds;
    rep.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    *o.report = rep;
  }
  if (o.verbose && comm.rank() == 0)
    std::clog << "hara (distributed, " << comm.size() << " ranks): " << built.samples << " samples, ranks";
  if (o.verbose && comm.rank() == 0) {
    for (int v : P.basis_ranks()) std::clog << " " << v;
    std::clog << ", " << std::chrono::duration<double>(clock::now() - t0).count() << " s" << std::endl;
  }
  return P;
}

}  // namespace h2expr
