#pragma once
// Distributed HARA from one set of samples: the single process's construction
// (randomized/hara_one_sample_set.hpp, its level's projection shared: near_field_projection.hpp) on
// each rank's share of the target's tree. The samples Omega, Y = M Omega (and for a general operator
// Psi, Z = M^T Psi) are split by rows like the matrix (Y, Z by distributed products; Omega, Psi drawn
// where they are used: an entry is a function of the user's index, so a rank draws its neighbours'
// leaves' rows itself and every rank sees the single process's). From the leaves up to the C-level
// each rank builds its own nodes; per level, one message per neighbour in each of three steps brings
// what its near fields hold of other ranks' nodes:
//   their ranks, column bases V and H blocks of the pairs they share (for D; a symmetric operator's
//   V = U and H = G), then their D blocks (D_ts := (D_ts + D_st^T) / 2 when symmetric; M^T's
//   compressed samples read D_st^T), then their compressed samples (the parents' near fields).
// The C-level's compressed samples are summed over the ranks (each row from one rank: exact), and
// every rank builds the top, as the products do. Top-down, each rank assembles its own block rows;
// one recompression (compress's, on the ranks; two bases for a general operator) ends it. A round
// that needs more samples keeps the levels it finished, which only compress the new columns, as in
// one process: the same matrix to rounding.
#include <h2expr/detail/core/splitmix.hpp>
#include <h2expr/detail/distributed/compress.hpp>
#include <h2expr/detail/distributed/expression.hpp>
#include <h2expr/detail/operations/hara.hpp>
#include <h2expr/detail/randomized/hara.hpp>
#include <h2expr/detail/randomized/near_field_projection.hpp>
#include <h2expr/detail/randomized/sample_rounds.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace h2expr::detail {

struct distributed_hara_result_report {
  int samples = 0;
  double norm_estimate = 0, seconds_sampling = 0, seconds_build = 0, seconds_compress = 0;
  std::int64_t bytes_sent = 0, messages_sent = 0;  // this rank's, in the construction's own exchanges
  std::vector<int> rank_min, rank_max;             // per level, over every rank, before the recompression
};

// One level in this rank's numbering: own nodes (global b0 .. b0 + own - 1; every node of a level
// above the C-level) then ghosts (the other ranks' nodes in the own nodes' near fields). f: the own
// nodes' near pairs, columns local, mirror the local pair of the transpose (-1 when its row is
// another rank's). Per neighbour: the own nodes it holds as ghosts and its nodes held here, the pairs
// with a partner there (in the order of the global index of the pair's transpose, to send, or of the
// pair, to receive; both sides then list the same pairs alike). Rows per node on the row side (nr:
// Y, Psi; the children's ku) and on the column side (nc: Omega, Z; the children's kv), equal for a
// symmetric operator (then V = U, Psi = Omega, and the column side's buffers stay empty).
template <class T, class Space>
struct distributed_level : level_blocks {
  bool top = false;
  int own = 0, b0 = 0;
  std::vector<int> ghost;
  near_field f;
  int pair0 = 0;  // the global index of local pair 0
  std::vector<int> peers;
  std::vector<std::vector<int>> send_nodes, recv_nodes, send_pairs, recv_pairs;
  std::vector<int> slot;  // per local pair with a remote transpose: its place among the received blocks
  int remote = 0;
  std::vector<int> nr, nc, ku, kv;  // per local node
  std::vector<int> wr, offr, wc, offc;
  int first = 0;  // the first sample column that om, y, ps and z hold (a finished level: the new ones)
  buffer<T, Space> om, y, ps, z, u, v, d, rh, rd;  // rh, rd: the received H and D blocks
  // Packed at each block's own size, as in hara_one_sample_set.hpp (every level's D is held until the
  // assembly): own pair e = (t, s)'s D at dat[e] (nr[t] x nc[s], leading dimension dld(t)); per slot of a
  // pair (t, s) whose transpose is another rank's, the received H_s block of t at rhat (nc[s] x nr[t])
  // and D_st at rdat (nr[s] x nc[t]), leading dimension their rows.
  std::vector<std::int64_t> dat, rhat, rdat;
  int dld(int t) const { return std::max(nr[t], 1); }
  int nodes() const { return own + int(ghost.size()); }
  int global(int t) const { return t < own ? b0 + t : ghost[std::size_t(t - own)]; }
  projection_shape shape(int l, int side, int s, std::uint64_t seed) const { return {*this, l, side, s, seed}; }
  const T* col_basis() const { return (v.size() ? v : u).data(); }  // V, or U when shared
};

template <class T, class Space>
class distributed_sample_builder
    : sample_rounds<distributed_sample_builder<T, Space>, distributed_level<T, Space>, T, Space> {
  H2EXPR_SAMPLE_ROUNDS(distributed_sample_builder, distributed_level);

 public:
  distributed_sample_builder(const distributed::expression<T, Space>& M, hara_parameters p)
      : rounds(M.layout().ctx, p, M.symmetric(), near_fields(M.layout().structure.blocks()),
               M.layout().structure.row_tree(), M.layout().depth(), M.layout().m_max),
        M_(M), A_(M.layout()), comm_(*A_.comm), D_(A_.dist), c_(D_.c) {}

  // Collective: the construction before its final recompression (which hara() runs).
  distributed_data<T, Space> run(distributed_hara_result_report& rep) {
    require(!near_.empty(), "distributed hara: the structure's near fields do not nest");
    require(L_ >= 1, "distributed hara: the structure is a single leaf (build it in one process)");
    this->start_rounds();
    ku_.assign(std::size_t(L_) + 1, {}), kv_.assign(std::size_t(L_) + 1, {});
    for (int l = 0; l <= L_; ++l) number(l);
    this->run_rounds(rep.seconds_sampling, rep.seconds_build);
    rep.samples = sym_ ? s_ : 2 * s_;
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
  using panel = sample_panel<T>;
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
    std::vector<std::vector<std::pair<int, int>>> s_list(P), r_list(P);  // (global key, local pair) per peer
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


  // Collective helpers: a failure anywhere raises on every rank; the largest value over the ranks.
  void agree(const rank_failure& f) const { comm_.agree("distributed hara", {}, f); }
  int largest(int v) const {
    std::vector<std::int64_t> x{v};
    comm_.max(x);
    return int(x[0]);
  }

  // Packs rows x cols blocks (column-major, ld lds at src + offset) one after the other into a message.
  struct block_ref {
    int rows, cols;
    std::int64_t at;
    int ld;
  };
  using block_group = std::pair<const T*, std::vector<block_ref>>;   // a source and its blocks
  using block_target = std::pair<T*, std::vector<block_ref>>;        // a destination and its blocks
  static std::int64_t values(const std::vector<block_ref>& blocks) {
    std::int64_t n = 0;
    for (const auto& b : blocks) n += std::int64_t(b.rows) * b.cols;
    return n;
  }
  // One message each way per neighbour of level d: to peers[i] the groups of send(i) (block_group or
  // block_target), from it those of receive(i) (block_target: their destinations), all in that order.
  template <class Send, class Receive>
  void exchange(const level_data& d, Send send, Receive receive) {
    std::vector<message<T, Space>> out, in;
    for (std::size_t i = 0; i < d.peers.size(); ++i) {
      const auto groups = send(i);
      std::int64_t n = 0;
      for (const auto& [src, blocks] : groups) n += values(blocks);
      message<T, Space> m(ctx_, std::size_t(n));
      n = 0;
      for (const auto& [src, blocks] : groups) {
        std::vector<item_copy> items;
        for (const auto& b : blocks) items.push_back({b.rows, b.cols, b.at, n, b.ld, std::max(b.rows, 1)}), n += std::int64_t(b.rows) * b.cols;
        copy_items(ctx_, src, m.data(), std::move(items));
      }
      m.before_send();
      out.push_back(std::move(m));
      std::int64_t r = 0;
      for (const auto& [dst, blocks] : receive(i)) r += values(blocks);
      in.emplace_back(ctx_, std::size_t(r));
      in.back().before_receive();
    }
    pending pm;
    for (std::size_t i = 0; i < d.peers.size(); ++i) {
      if (in[i].size()) pm.receive(comm_, in[i].mpi(), in[i].size(), d.peers[i]);
      if (out[i].size()) {
        pm.send(comm_, out[i].mpi(), out[i].size(), d.peers[i]);
        bytes_sent_ += std::int64_t(out[i].size() * sizeof(T)), ++messages_sent_;
      }
    }
    pm.wait();
    for (std::size_t i = 0; i < d.peers.size(); ++i) {
      in[i].after_receive();
      std::int64_t n = 0;
      for (const auto& [dst, blocks] : receive(i)) {
        std::vector<item_copy> items;
        for (const auto& b : blocks) items.push_back({b.rows, b.cols, n, b.at, std::max(b.rows, 1), b.ld}), n += std::int64_t(b.rows) * b.cols;
        copy_items(ctx_, in[i].data(), dst, std::move(items));
      }
    }
  }

  // Columns s_ .. s - 1 of Omega (the own and the ghost leaves' rows) and Y = M Omega (the own leaves'),
  // and for a general operator Psi and Z = M^T Psi, in the single process's columns: chunks of 256
  // drawn from the round's seed.
  void sample(int s, int round) {
    auto& c = *ctx_;
    auto& d = lv_[L_];
    const int w = s - s_, nodes = d.nodes(), own = d.own;
    const std::int64_t rows_in = std::int64_t(std::max(nodes, 1)) * m_, rows_out = std::int64_t(std::max(own, 1)) * m_;
    const auto& tree = A_.structure.row_tree();
    const int first_leaf = cluster_tree::level_begin(L_);
    const index local_rows = index(A_.local_indices.size());
    constexpr int chunk = 256;
    agree(rank_failure::of([&] {  // on every rank, should one of them lack the memory
      check_sample_memory(c, (sym_ ? 1 : 2) * std::size_t(rows_in + rows_out) * sizeof(T) * std::size_t(s - base_), s,
                          rows_in);
    }));
    // Until the leaves are built the panels keep the earlier columns; then they hold the new ones alone
    // (from base_, set by release_samples).
    auto draw = [&](buffer<T, Space>& in, buffer<T, Space>& out, op o, std::uint64_t seed) {
      auto grow = [&](buffer<T, Space>& b, std::int64_t rows) {
        buffer<T, Space> g(ctx_, std::size_t(rows) * (s - base_));
        if (s_ > base_) copy(c, b.data(), g.data(), std::size_t(rows) * (s_ - base_));
        b = std::move(g);
      };
      grow(in, rows_in), grow(out, rows_out);
      for (int j = 0; j < w; j += chunk) {
        const int cols = std::min(chunk, w - j);
        const std::uint64_t cs = splitmix64(seed + std::uint64_t(j));
        // The panel's rows (own and ghost leaves, padded), each entry from the user's index; X, the own
        // rows in the order of local_indices, is read from it.
        dense<T> X = dense<T>::Zero(rows_in, cols);
#pragma omp parallel for schedule(static)
        for (int v = 0; v < cols; ++v)
          for (int t = 0; t < nodes; ++t) {
            const int node = first_leaf + d.global(t);
            for (int i = 0; i < tree.size(node); ++i)
              X(std::int64_t(t) * m_ + i, v) = random_entry<T>(distribution::normal, cs, 0, std::uint64_t(v),
                                                               std::int64_t(tree.perm[std::size_t(tree.begin[node] + i)]));
          }
        T* at_in = in.data() + std::int64_t(s_ + j - base_) * rows_in;
        upload_2d(c, std::size_t(rows_in), std::size_t(cols), X.data(), std::size_t(rows_in), at_in, std::size_t(rows_in));
        auto Xm = matrix<T, Space>::uninitialized(local_rows, cols, ctx_);
        if (own > 0)
          scatter_rows(c, A_.padded_to_local.data(), std::int64_t(own) * m_, at_in, rows_in, Xm.data(),
                       std::max<index>(local_rows, 1), cols);
        auto Y = matrix<T, Space>::uninitialized(local_rows, cols, ctx_);
        M_.apply(o, Xm.view(), Y.view());
        double energy = Y.size() ? sum_of_squares(c, Y.data(), std::size_t(Y.size())) : 0.0;
        comm_.sum_in_rank_order(&energy, 1);
        require<non_finite_value>(std::isfinite(energy), "hara: the operator's products are not finite");
        energy_ += energy, columns_ += cols;
        if (own > 0)
          gather_rows(c, A_.padded_to_local.data(), std::int64_t(own) * m_, Y.data(), std::max<index>(local_rows, 1),
                      out.data() + std::int64_t(s_ + j - base_) * rows_out, rows_out, cols);
      }
    };
    const std::uint64_t seed = splitmix64(p_.seed + 0x9e3779b97f4a7c15ull * std::uint64_t(round + 1));
    draw(omega_, y_, op::none, seed);
    if (!sym_) draw(psi_, z_, op::transpose, splitmix64(seed ^ 0x5851f42d4c957f2dull));
    prev_ = s_, s_ = s;
    norm_ = std::sqrt(energy_ / std::max(columns_, 1));
    d.nr.assign(std::size_t(nodes), 0);
    for (int t = 0; t < nodes; ++t) d.nr[t] = leaf_[std::size_t(d.global(t))];
    d.nc = d.nr;
    d.ld = m_;
  }

  // Level l's panels: Omega (omega_side) or Y, or with transpose_side Psi or Z.
  panel samples(int l, bool omega_side, bool transpose_side) {
    auto& d = lv_[l];
    panel p;
    p.at.resize(std::size_t(d.nodes()));
    if (l == L_) {
      buffer<T, Space>& b = transpose_side ? (omega_side ? psi_ : z_) : (omega_side ? omega_ : y_);
      p.base = b.data();
      p.ld = int(std::int64_t(std::max(omega_side ? d.nodes() : d.own, 1)) * m_);
      for (int t = 0; t < d.nodes(); ++t) p.at[t] = std::int64_t(t) * m_ - std::int64_t(base_) * p.ld;  // + column * ld
    } else {
      buffer<T, Space>& b = transpose_side ? (omega_side ? d.ps : d.z) : (omega_side ? d.om : d.y);
      p.base = b.data();
      p.ld = d.ld;
      for (int t = 0; t < d.nodes(); ++t) p.at[t] = (std::int64_t(t) * (s_ - d.first) - d.first) * d.ld;  // + column * ld
    }
    return p;
  }

  // Where each near partner's rows sit in an own node's stacked near field, for both sides.
  void near_layout(int l) {
    auto& d = lv_[l];
    d.wr.assign(std::size_t(d.own), 0), d.wc.assign(std::size_t(d.own), 0);
    d.offr.assign(d.f.col.size(), 0), d.offc.assign(d.f.col.size(), 0);
    d.nearw = 1;
    for (int t = 0; t < d.own; ++t) {
      for (int e = d.f.ptr[t]; e < d.f.ptr[t + 1]; ++e) {
        const int c = d.f.col[e];
        d.offr[e] = d.wr[t], d.wr[t] += d.nc[c], d.offc[e] = d.wc[t], d.wc[t] += d.nr[c];
      }
      d.nearw = std::max({d.nearw, d.wr[t], d.wc[t]});
    }
  }

  // One side's projection (project_near_fields) and node ranks of the own nodes; bases into `basis`
  // (every local node's room, the ghosts' filled by exchange). `live` counts the side's nodes with rows
  // over every rank. Returns the samples the level needs (0: enough).
  int project_side(int l, int side, buffer<T, Space>& g, buffer<T, Space>* basis, std::vector<int>* k, int live) {
    auto& d = lv_[l];
    const bool t = side == 1;
    const panel om = samples(l, true, t), y = samples(l, false, t);
    const std::vector<int>& rows = t ? d.nr : d.nc;
    const std::vector<int>& nout = t ? d.nc : d.nr;
    const auto sh = d.shape(l, side, s_, p_.seed);
    std::vector<double> check;
    if (basis) {
      *basis = buffer<T, Space>(ctx_, std::size_t(std::max(d.nodes(), 1)) * d.basis_stride());
      fill(*ctx_, basis->data(), basis->size(), T(0));
    }
    project_near_fields(ctx_, sh, near_side<T>{d.f, whole(om), rows, t ? d.offc : d.offr, t ? d.wc : d.wr, y, nout}, g,
                        basis ? basis->data() : nullptr, basis ? &check : nullptr);
    if (!basis) return 0;
    const double share = level_share(0.5 * p_.tol * norm_, l, L_, live);
    const int need = node_ranks(l, s_, d.ld, p_.converge_samples, p_.block_size, check, t ? d.wc : d.wr, nout, share, cap_,
                                p_.tol, d.b0, *k);
    k->resize(std::size_t(d.nodes()), 0);
    return need;
  }

  // Every node's ranks at level l (ku_[l], kv_[l]: global), from the own nodes' (the ghosts' then read
  // from them).
  void share_ranks(int l) {
    auto& d = lv_[l];
    const std::size_t n = std::size_t(1) << l;
    std::vector<std::int64_t> all(2 * n, 0);
    for (int t = 0; t < d.own; ++t) all[std::size_t(d.global(t))] = d.ku[t], all[n + std::size_t(d.global(t))] = d.kv[t];
    if (!d.top) comm_.max(all);
    ku_[l].assign(all.begin(), all.begin() + std::ptrdiff_t(n)), kv_[l].assign(all.begin() + std::ptrdiff_t(n), all.end());
    for (int t = d.own; t < d.nodes(); ++t) d.ku[t] = ku_[l][std::size_t(d.global(t))], d.kv[t] = kv_[l][std::size_t(d.global(t))];
  }
  int rows_of(const std::vector<std::vector<int>>& k, int l, int t) const {  // of local node t of level l < L: its children's ranks
    const int g = lv_[l].global(t);
    return k[l + 1][std::size_t(2 * g)] + k[l + 1][std::size_t(2 * g + 1)];
  }

  // The level's bases and near blocks, and the parents' compressed samples; the samples the level needs
  // (0: enough).
  int level(int l) {
    auto& d = lv_[l];
    d.p = p_.converge_samples;
    if (l < L_) {  // rows: the children's ranks
      d.nr.assign(std::size_t(d.nodes()), 0), d.nc.assign(std::size_t(d.nodes()), 0);
      for (int t = 0; t < d.nodes(); ++t) d.nr[t] = rows_of(ku_, l, t), d.nc[t] = rows_of(kv_, l, t);
    }
    near_layout(l);
    int more = 0;
    for (int t = 0; t < d.own; ++t) more = std::max(more, short_of(std::max(d.wr[t], d.wc[t])));
    if ((more = largest(more))) return more;
    std::int64_t live[2] = {0, 0};
    for (int t = 0; t < d.own; ++t) live[0] += d.nr[t] > 0, live[1] += d.nc[t] > 0;
    if (!d.top) comm_.sum_in_rank_order(live, 2);
    buffer<T, Space> g, h;
    int need = 0;
    agree(rank_failure::of([&] {
      need = project_side(l, 0, g, &d.u, &d.ku, int(live[0]));
      if (!sym_) need = std::max(need, project_side(l, 1, h, &d.v, &d.kv, int(live[1])));
      else d.kv = d.ku;
    }));
    if ((need = largest(need))) return need;
    share_ranks(l);
    T* v = sym_ ? d.u.data() : d.v.data();
    const buffer<T, Space>& hh = sym_ ? g : h;  // H_s: G_s for a symmetric operator

    // The neighbours' column bases (V) of the shared nodes and their H blocks of the shared pairs.
    if (!d.top) {
      d.rhat = packed_slots(d, d.nc, d.nr);
      d.rh = buffer<T, Space>(ctx_, std::size_t(std::max<std::int64_t>(d.rhat.back(), 1)));
      fill(*ctx_, d.rh.data(), d.rh.size(), T(0));
      exchange(
          d,
          [&](std::size_t i) {
            std::vector<block_ref> bv, bh;
            for (int t : d.send_nodes[i]) bv.push_back({d.nc[t], d.kv[t], d.basis_at(t), d.ld});
            for (int e : d.send_pairs[i]) {
              const int t = row_of(d, e);
              bh.push_back({d.nc[t], d.nr[d.f.col[e]], d.row_block(t) + std::int64_t(d.offc[e]) * d.ld, d.ld});
            }
            return std::vector<block_group>{{v, bv}, {hh.data(), bh}};
          },
          [&](std::size_t i) {
            std::vector<block_ref> bv, bh;
            for (int t : d.recv_nodes[i]) bv.push_back({d.nc[t], d.kv[t], d.basis_at(t), d.ld});
            for (int e : d.recv_pairs[i]) {
              const int rows = d.nc[d.f.col[e]];
              bh.push_back({rows, d.nr[row_of(d, e)], d.rhat[std::size_t(d.slot[e])], std::max(rows, 1)});
            }
            return std::vector<block_target>{{v, bv}, {d.rh.data(), bh}};
          });
    }

    // Per own near pair (t, s): D = G_ts + U_t E, E = U_t^T H_st^T - U_t^T G_ts - (U_t^T H_st^T V_s) V_s^T,
    // H_st: H_s's block of t (here, or received). One near partner of every own node at a time, so that
    // E and X hold a block per node, not per pair (as in hara_one_sample_set.hpp).
    const int ld = d.ld;
    const std::size_t block = std::size_t(ld) * ld;
    int most = 0;
    for (int t = 0; t < d.own; ++t) most = std::max(most, d.f.ptr[t + 1] - d.f.ptr[t]);
    buffer<T, Space> e(ctx_, std::size_t(std::max(d.own, 1)) * block), x(ctx_, std::size_t(std::max(d.own, 1)) * block);
    d.dat = d.f.packed(d.nr, d.nc);
    d.d = buffer<T, Space>(ctx_, std::size_t(std::max<std::int64_t>(d.dat.back(), 1)));
    fill(*ctx_, d.d.data(), d.d.size(), T(0));
    {
      std::vector<item_gemm> e1_here, e1_there, x1, e2, e3, d1;
      std::vector<item_copy> dg;
      const T* u = d.u.data();
      for (int j = 0; j < most; ++j) {
        for (auto* list : {&e1_here, &e1_there, &x1, &e2, &e3, &d1}) list->clear();
        dg.clear();
        for (int t = 0; t < d.own; ++t) {
          if (d.f.ptr[t] + j >= d.f.ptr[t + 1]) continue;
          const int q = d.f.ptr[t] + j, c = d.f.col[q], nr = d.nr[t], nc = d.nc[c], ku = d.ku[t], kv = d.kv[c];
          const std::int64_t b = d.dat[q], w = std::int64_t(t) * ld * ld, ut = d.basis_at(t), vc = d.basis_at(c);
          const std::int64_t gts = d.row_block(t) + std::int64_t(d.offr[q]) * ld;
          if (d.f.mirror[q] >= 0)
            e1_here.push_back({ku, nc, nr, ut, d.row_block(c) + std::int64_t(d.offc[d.f.mirror[q]]) * ld, w, ld, ld, ld});
          else
            e1_there.push_back({ku, nc, nr, ut, d.rhat[std::size_t(d.slot[q])], w, ld, std::max(nc, 1), ld});
          x1.push_back({ku, kv, nc, w, vc, w, ld, ld, ld});
          e2.push_back({ku, nc, nr, ut, gts, w, ld, ld, ld});
          e3.push_back({ku, nc, kv, w, vc, w, ld, ld, ld});
          dg.push_back({nr, nc, gts, b, ld, d.dld(t)});
          d1.push_back({nr, nc, ku, ut, w, b, ld, ld, d.dld(t)});
        }
        gemm_items(ctx_, op::transpose, op::transpose, T(1), u, hh.data(), T(0), e.data(), e1_here);  // U^T H^T
        gemm_items(ctx_, op::transpose, op::transpose, T(1), u, d.rh.data(), T(0), e.data(), e1_there);
        gemm_items(ctx_, op::none, op::none, T(1), e.data(), v, T(0), x.data(), x1);  // (U^T H^T) V
        gemm_items(ctx_, op::transpose, op::none, T(-1), u, g.data(), T(1), e.data(), e2);
        gemm_items(ctx_, op::none, op::transpose, T(-1), x.data(), v, T(1), e.data(), e3);
        copy_items(ctx_, g.data(), d.d.data(), dg);
        gemm_items(ctx_, op::none, op::none, T(1), u, e.data(), T(1), d.d.data(), d1);
      }
    }
    g = buffer<T, Space>(), h = buffer<T, Space>(), e = buffer<T, Space>(), x = buffer<T, Space>(), d.rh = buffer<T, Space>();
    receive_transposes(l);  // kept with the level: a finished level's compress_samples reads it again
    if (sym_) symmetrize(l);
    compress_samples(l, 0);
    return 0;
  }

  static int row_of(const level_data& d, int e) {
    return int(std::upper_bound(d.f.ptr.begin(), d.f.ptr.end(), e) - d.f.ptr.begin()) - 1;
  }

  // Where each received block starts when packed in slot order: rows[s] x cols[t] for the slot of own
  // pair (t, s) (slots + 1 entries).
  static std::vector<std::int64_t> packed_slots(const level_data& d, const std::vector<int>& rows, const std::vector<int>& cols) {
    std::vector<std::int64_t> at(std::size_t(d.remote) + 1, 0);
    for (int t = 0; t < d.own; ++t)
      for (int q = d.f.ptr[t]; q < d.f.ptr[t + 1]; ++q)
        if (!d.slot.empty() && d.slot[q] >= 0) at[std::size_t(d.slot[q]) + 1] = std::int64_t(rows[d.f.col[q]]) * cols[t];
    std::partial_sum(at.begin(), at.end(), at.begin());
    return at;
  }

  // rd: D_st of every own pair (t, s) whose transpose's row s is another rank's (symmetrize and the
  // compressed samples of M^T read it).
  void receive_transposes(int l) {
    auto& d = lv_[l];
    d.rdat = packed_slots(d, d.nr, d.nc);
    d.rd = buffer<T, Space>(ctx_, std::size_t(std::max<std::int64_t>(d.rdat.back(), 1)));
    fill(*ctx_, d.rd.data(), d.rd.size(), T(0));
    if (d.top || d.peers.empty()) return;
    exchange(
        d,
        [&](std::size_t i) {
          std::vector<block_ref> send;
          for (int e : d.send_pairs[i]) {
            const int t = row_of(d, e);
            send.push_back({d.nr[t], d.nc[d.f.col[e]], d.dat[std::size_t(e)], d.dld(t)});
          }
          return std::vector<block_group>{{d.d.data(), send}};
        },
        [&](std::size_t i) {
          std::vector<block_ref> receive;
          for (int e : d.recv_pairs[i]) {
            const int c = d.f.col[e];
            receive.push_back({d.nr[c], d.nc[row_of(d, e)], d.rdat[std::size_t(d.slot[e])], d.dld(c)});
          }
          return std::vector<block_target>{{d.rd.data(), receive}};
        });
  }

  // The transposes D_st^T of the own pairs (t, s) (here or received) into pair (t, s)'s place: copy_items
  // lists, their sizes the destination's.
  void transposes(const level_data& d, std::vector<item_copy>& here, std::vector<item_copy>& there) const {
    for (int t = 0; t < d.own; ++t)
      for (int q = d.f.ptr[t]; q < d.f.ptr[t + 1]; ++q) {
        const int c = d.f.col[q];
        if (d.f.mirror[q] >= 0) here.push_back({d.nr[t], d.nc[c], d.dat[std::size_t(d.f.mirror[q])], d.dat[q], d.dld(c), d.dld(t)});
        else there.push_back({d.nr[t], d.nc[c], d.rdat[std::size_t(d.slot[q])], d.dat[q], d.dld(c), d.dld(t)});
      }
  }

  // D_ts := (D_ts + D_st^T) / 2 for a symmetric operator: its H2 matrix is then exactly symmetric.
  void symmetrize(int l) {
    auto& d = lv_[l];
    buffer<T, Space> tr(ctx_, d.d.size());
    fill(*ctx_, tr.data(), tr.size(), T(0));
    std::vector<item_copy> here, there;
    transposes(d, here, there);
    copy_items(ctx_, d.d.data(), tr.data(), here, op::transpose);
    if (!there.empty()) copy_items(ctx_, d.rd.data(), tr.data(), there, op::transpose);
    if (d.d.size()) axpby_2d(*ctx_, d.d.size(), 1, T(0.5), tr.data(), d.d.size(), T(0.5), d.d.data(), d.d.size());
  }

  // The parent level's samples: Omega^ = V^T Omega, Y^ = U^T (Y - sum_s D_ts Omega_s) (and Psi^ =
  // U^T Psi, Z^ = V^T (Z - sum_t D_ts^T Psi_t)), each child's rows after its sibling's; columns c0 ..
  // s_ - 1. A parent level still to be built keeps its first c0 columns before them; a finished one
  // holds the new columns alone. Below the C-level into the own parents (then the ghosts' Omega^ and
  // Psi^ from their ranks); from the C-level into every top node's, summed over the ranks.
  void compress_samples(int l, int c0) {
    auto& d = lv_[l];
    auto& up = lv_[l - 1];
    const int s = s_ - c0, ld = d.ld;
    int upld = 1;
    for (int g = 0; g < (1 << (l - 1)); ++g)
      upld = std::max({upld, ku_[l][std::size_t(2 * g)] + ku_[l][std::size_t(2 * g + 1)],
                       kv_[l][std::size_t(2 * g)] + kv_[l][std::size_t(2 * g + 1)]});
    up.ld = upld;
    up.first = l - 1 >= done_ ? c0 : 0;
    // ups: a parent's block; old: the elements of its columns before c0 that it keeps.
    const std::int64_t ups = std::int64_t(s_ - up.first) * up.ld, old = std::int64_t(c0 - up.first) * up.ld;
    auto alloc = [&](buffer<T, Space>& b) {
      buffer<T, Space> g(ctx_, std::size_t(std::max(up.nodes(), 1)) * ups);
      fill(*ctx_, g.data(), g.size(), T(0));
      if (old > 0) {  // each parent's old block (up.ld x c0, contiguous) starts its new one
        std::vector<item_copy> keep;
        for (int j = 0; j < up.nodes(); ++j) keep.push_back({up.ld, c0, j * old, j * ups, up.ld, up.ld});
        copy_items(ctx_, b.data(), g.data(), keep);
      }
      b = std::move(g);
    };
    alloc(up.om), alloc(up.y);
    if (!sym_) alloc(up.ps), alloc(up.z);
    int most = 0;
    for (int t = 0; t < d.own; ++t) most = std::max(most, d.f.ptr[t + 1] - d.f.ptr[t]);
    // The own child t's block of new columns in a parent panel, below its sibling's k rows.
    auto parent_at = [&](int t, const std::vector<int>& k) {
      const int g = d.global(t), j = g / 2;
      const int row = (g & 1) ? k[std::size_t(g - 1)] : 0;
      return std::int64_t(local(l - 1, j)) * ups + old + row;
    };
    // One side: out^ = B^T out - sum_s (B^T op(D)) in_s into the parents' blocks (see
    // one_sample_set_builder::compress_samples); op(D) = D_st^T (here or received) for M^T.
    auto side = [&](const panel& in, const panel& out, const std::vector<int>& nin, const std::vector<int>& nout,
                    const T* bin, const std::vector<int>& kin, const std::vector<int>& gin, const T* bout,
                    const std::vector<int>& kout, const std::vector<int>& gout, bool mirror, buffer<T, Space>& to_in,
                    buffer<T, Space>& to_out) {
      auto column0 = [&](const panel& p, int t) { return p.at[t] + std::int64_t(c0) * p.ld; };
      const auto eat = d.f.packed(kout, nin);  // E = B^T op(D), kout[t] x nin[s] per pair, packed
      buffer<T, Space> e(ctx_, std::size_t(std::max<std::int64_t>(eat.back(), 1)));
      std::vector<item_gemm> hin, hout, be, be_there;
      for (int t = 0; t < d.own; ++t) {
        hin.push_back({kin[t], s, nin[t], d.basis_at(t), column0(in, t), parent_at(t, gin), ld, in.ld, up.ld});
        hout.push_back({kout[t], s, nout[t], d.basis_at(t), column0(out, t), parent_at(t, gout), ld, out.ld, up.ld});
        for (int q = d.f.ptr[t]; q < d.f.ptr[t + 1]; ++q) {
          const int c = d.f.col[q];
          const int lde = std::max(kout[t], 1);
          if (!mirror) be.push_back({kout[t], nin[c], nout[t], d.basis_at(t), d.dat[q], eat[q], ld, d.dld(t), lde});
          else if (d.f.mirror[q] >= 0)
            be.push_back({kout[t], nin[c], nout[t], d.basis_at(t), d.dat[std::size_t(d.f.mirror[q])], eat[q], ld, d.dld(c), lde});
          else be_there.push_back({kout[t], nin[c], nout[t], d.basis_at(t), d.rdat[std::size_t(d.slot[q])], eat[q], ld, d.dld(c), lde});
        }
      }
      const op od = mirror ? op::transpose : op::none;
      gemm_items(ctx_, op::transpose, op::none, T(1), bin, in.base, T(0), to_in.data(), hin);
      gemm_items(ctx_, op::transpose, op::none, T(1), bout, out.base, T(0), to_out.data(), hout);
      gemm_items(ctx_, op::transpose, od, T(1), bout, d.d.data(), T(0), e.data(), be);
      gemm_items(ctx_, op::transpose, od, T(1), bout, d.rd.data(), T(0), e.data(), be_there);
      for (int j = 0; j < most; ++j) {
        std::vector<item_gemm> es;
        for (int t = 0; t < d.own; ++t) {
          if (d.f.ptr[t] + j >= d.f.ptr[t + 1]) continue;
          const int q = d.f.ptr[t] + j, c = d.f.col[q];
          es.push_back({kout[t], s, nin[c], eat[q], column0(in, c), parent_at(t, gout), std::max(kout[t], 1), in.ld, up.ld});
        }
        gemm_items(ctx_, op::none, op::none, T(-1), e.data(), in.base, T(1), to_out.data(), es);
      }
    };
    const T* u = d.u.data();
    const T* v = sym_ ? u : d.v.data();
    side(samples(l, true, false), samples(l, false, false), d.nc, d.nr, v, d.kv, kv_[l], u, d.ku, ku_[l], false, up.om, up.y);
    if (!sym_)
      side(samples(l, true, true), samples(l, false, true), d.nr, d.nc, u, d.ku, ku_[l], v, d.kv, kv_[l], true, up.ps, up.z);
    // The new columns of every parent: (rows, s) at j * ups + old.
    auto new_columns = [&](const std::vector<int>& nodes, bool psi) {
      std::vector<block_ref> b;
      for (int t : nodes) b.push_back({rows_of(psi ? ku_ : kv_, l - 1, t), s, std::int64_t(t) * ups + old, up.ld});
      return b;
    };
    if (up.top && !d.top) {  // the C-level's into the top: every row from one rank, the rest zero
      std::vector<int> all(std::size_t(up.nodes()));
      std::iota(all.begin(), all.end(), 0);
      std::vector<block_ref> whole;  // every row of the new columns
      for (int t : all) whole.push_back({up.ld, s, std::int64_t(t) * ups + old, up.ld});
      for (auto* b : {&up.om, &up.y, &up.ps, &up.z})
        if (b->size()) sum_over_ranks(b->data(), whole);
    } else if (!up.top) {  // the ghosts' compressed samples (their Omega^ and Psi^ alone are read here)
      auto blocks = [&](const std::vector<int>& nodes) {
        return std::vector<block_target>{{up.om.data(), new_columns(nodes, false)},
                                        {up.ps.data(), sym_ ? std::vector<block_ref>{} : new_columns(nodes, true)}};
      };
      exchange(
          up, [&](std::size_t i) { return blocks(up.send_nodes[i]); }, [&](std::size_t i) { return blocks(up.recv_nodes[i]); });
    }
  }

  // The blocks of b summed over the ranks, in place.
  void sum_over_ranks(T* b, const std::vector<block_ref>& blocks) {
    const std::int64_t n = values(blocks);
    require(n <= std::int64_t(INT32_MAX), "distributed hara: the top's samples pass 2^31 - 1 values");
    message<T, Space> m(ctx_, std::size_t(n));
    std::vector<item_copy> pack, unpack;
    std::int64_t at = 0;
    for (const auto& x : blocks)
      pack.push_back({x.rows, x.cols, x.at, at, x.ld, std::max(x.rows, 1)}),
          unpack.push_back({x.rows, x.cols, at, x.at, std::max(x.rows, 1), x.ld}), at += std::int64_t(x.rows) * x.cols;
    copy_items(ctx_, b, m.data(), std::move(pack));
    m.before_send();  // MPI_Allreduce writes where it reads: this also covers before_receive
    // Exact in any order: every entry has one nonzero term.
    mpi_check(MPI_Allreduce(MPI_IN_PLACE, m.mpi(), int(n), mpi_type<T>(), MPI_SUM, comm_.get()), "MPI_Allreduce");
    m.after_receive();
    copy_items(ctx_, m.data(), b, std::move(unpack));
  }

  // The root's D = Y Omega^+ (the compressed matrix of the two top nodes, whole).
  int root() {
    auto& d = lv_[0];
    d.nr.assign(std::size_t(d.nodes()), 0), d.nc.assign(std::size_t(d.nodes()), 0);
    for (int t = 0; t < d.nodes(); ++t) d.nr[t] = rows_of(ku_, 0, t), d.nc[t] = rows_of(kv_, 0, t);
    d.ld = std::max({1, d.nr[0], d.nc[0]});
    near_layout(0);
    int more = 0;
    for (int t = 0; t < d.own; ++t) more = std::max(more, short_of(d.wr[t]));
    if ((more = largest(more))) return more;
    ku_[0].assign(1, 0), kv_[0].assign(1, 0);
    d.ku.assign(std::size_t(d.nodes()), 0), d.kv.assign(std::size_t(d.nodes()), 0);
    buffer<T, Space> g;
    agree(rank_failure::of([&] {
      if (d.own > 0) project_side(0, 0, g, nullptr, nullptr, 1);
    }));
    // Node 0's block is pair 0's (nearw == its columns, ld rows): packed at its own rows.
    d.dat = d.f.packed(d.nr, d.nc);
    if (d.own > 0 && d.ld != d.dld(0)) {
      buffer<T, Space> p(ctx_, std::size_t(std::max<std::int64_t>(d.dat.back(), 1)));
      copy_items(ctx_, g.data(), p.data(), {{d.nr[0], d.nc[0], 0, 0, d.ld, d.dld(0)}});
      g = std::move(p);
    }
    d.d = std::move(g);
    if (d.own > 0 && sym_) {
      d.rd = buffer<T, Space>();
      symmetrize(0);
    }
    return 0;
  }

  // The distributed matrix: bases from U (and V), top-down the near pairs' cores split into the
  // children's coupling blocks and cores, dense leaves D + U C V^T; uniform ranks per level (zero
  // columns past a node's), the layout of the operator's matrix.
  distributed_data<T, Space> assemble() {
    distributed_data<T, Space> H;
    H.comm = A_.comm, H.dist = D_, H.ctx = ctx_, H.structure = A_.structure, H.m_max = m_, H.symmetric = sym_;
    H.top_level = A_.top_level;
    const auto& blocks = A_.structure.blocks();
    for (int l = 0; l < c_; ++l) H.top_arrays.emplace_back(ctx_, blocks.coupling[l]);
    H.split_host = A_.split_host;
    for (const auto& sp : H.split_host) H.splits.emplace_back(ctx_, sp);
    H.peers = A_.peers;
    H.padded_to_local = clone(A_.padded_to_local);
    H.local_indices = A_.local_indices;
    std::vector<int> r(std::size_t(L_) + 1, 0);
    for (int l = 1; l <= L_; ++l)
      r[l] = std::max(*std::max_element(ku_[l].begin(), ku_[l].end()), *std::max_element(kv_[l].begin(), kv_[l].end()));
    H.rank = r;
    const int S = D_.slots();
    for (int s = 0; s < S; ++s) H.unit.push_back(s == S - 1 ? m_ : r[c_ + s]);

    // Bases: the rows' from U (ku), the columns' from V (kv).
    auto basis = [&](bool col) {
      const auto& k = col ? kv_ : ku_;
      auto B = std::make_shared<basis_share<T, Space>>();
      B->orthonormal = true;
      const auto& d = lv_[L_];
      B->leaves = buffer<T, Space>(ctx_, std::size_t(d.own) * m_ * r[L_]);
      fill(*ctx_, B->leaves.data(), B->leaves.size(), T(0));
      std::vector<item_copy> items;
      for (int t = 0; t < d.own; ++t)
        items.push_back({(col ? d.nc : d.nr)[t], (col ? d.kv : d.ku)[t], d.basis_at(t), std::int64_t(t) * m_ * r[L_], d.ld, m_});
      copy_items(ctx_, col ? d.col_basis() : d.u.data(), B->leaves.data(), items);
      B->transfers.resize(std::size_t(L_) + 1);
      for (int l = 1; l <= L_; ++l) {
        const auto& pd = lv_[l - 1];
        const int parents = pd.own, rc = r[l], rp = r[l - 1];
        B->transfers[l] = buffer<T, Space>(ctx_, std::size_t(parents) * 2 * rc * rp);
        fill(*ctx_, B->transfers[l].data(), B->transfers[l].size(), T(0));
        if (l == 1 || rc == 0 || rp == 0) continue;  // the root has no basis
        items.clear();
        for (int j = 0; j < parents; ++j) {
          const int g = pd.global(j), k0 = k[l][std::size_t(2 * g)], k1 = k[l][std::size_t(2 * g + 1)];
          const int kp = (col ? pd.kv : pd.ku)[j];
          const std::int64_t at = std::int64_t(j) * 2 * rc * rp;
          items.push_back({k0, kp, pd.basis_at(j), at, pd.ld, 2 * rc});
          items.push_back({k1, kp, pd.basis_at(j) + k0, at + rc, pd.ld, 2 * rc});
        }
        copy_items(ctx_, col ? pd.col_basis() : pd.u.data(), B->transfers[l].data(), items);
      }
      return B;
    };
    H.row_basis = basis(false);
    H.col_basis = sym_ ? H.row_basis : basis(true);

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
    // Per near pair (j, i) of a parent level and row child a: E_a C_ji (ku(a) x kv(i), at eat[2 q + ha],
    // leading dimension ku(a)); then per child pair (a, b) its block of D_ji plus that times F_b^T, into
    // the coupling block or the core. The cores: per near pair e = (a, b) of a level, ku(a) x kv(b) at
    // cat[l][e], leading dimension ku(a).
    std::vector<buffer<T, Space>> C(static_cast<std::size_t>(L_) + 1);
    std::vector<std::vector<std::int64_t>> cat(static_cast<std::size_t>(L_) + 1);
    for (int l = 1; l <= L_; ++l) {
      auto& d = lv_[l];
      auto& pd = lv_[l - 1];
      const auto& adm = blocks.coupling[l];
      cat[l] = d.f.packed(d.ku, d.kv);
      C[l] = buffer<T, Space>(ctx_, std::size_t(std::max<std::int64_t>(cat[l].back(), 1)));
      fill(*ctx_, C[l].data(), C[l].size(), T(0));
      T* coupling = l < c_ ? H.top_coupling[l].data() : H.blocks[std::size_t(l - c_)].data();
      const int rl = std::max(r[l], 1);
      const auto& ku = ku_[l];
      const auto& kv = kv_[l];
      const auto& kup = ku_[l - 1];
      const auto& kvp = kv_[l - 1];
      std::vector<std::int64_t> eat(std::size_t(2) * pd.f.pairs() + 1, 0);
      for (int jl = 0; jl < pd.own; ++jl)
        for (int q = pd.f.ptr[jl]; q < pd.f.ptr[jl + 1]; ++q)
          for (int ha = 0; ha < 2; ++ha)
            eat[2 * q + ha + 1] = eat[2 * q + ha] + (l > 1 ? std::int64_t(ku[std::size_t(2 * pd.global(jl) + ha)]) *
                                                                 kvp[std::size_t(pd.global(pd.f.col[q]))]
                                                           : 0);
      buffer<T, Space> ec(ctx_, std::size_t(std::max<std::int64_t>(eat.back(), 1)));
      std::vector<item_gemm> g1, gc, gs;
      std::vector<item_copy> cc, cs;
      for (int jl = 0; jl < pd.own; ++jl) {
        const int j = pd.global(jl);
        for (int q = pd.f.ptr[jl]; q < pd.f.ptr[jl + 1]; ++q) {
          const int il = pd.f.col[q], i = pd.global(il);
          for (int ha = 0; ha < 2; ++ha) {
            const int a = 2 * j + ha;
            if (!d.top && (a < d.b0 || a >= d.b0 + d.own)) continue;  // another rank's row (the C-level)
            const int al = a - d.b0, ro = ha ? ku[std::size_t(a - 1)] : 0;
            const std::int64_t et = eat[2 * q + ha];
            const int lde = std::max(ku[std::size_t(a)], 1);
            if (l > 1)
              g1.push_back({ku[std::size_t(a)], kvp[std::size_t(i)], kup[std::size_t(j)], pd.basis_at(jl) + ro, cat[l - 1][q], et,
                            pd.ld, std::max(kup[std::size_t(j)], 1), lde});
            for (int hb = 0; hb < 2; ++hb) {
              const int b = 2 * i + hb, co = hb ? kv[std::size_t(b - 1)] : 0;
              const std::int64_t src = pd.dat[q] + ro + std::int64_t(co) * pd.dld(jl);
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
                is_coupling = false, dst = cat[l][e], ldd = lde;
              }
              (is_coupling ? cs : cc).push_back({ku[std::size_t(a)], kv[std::size_t(b)], src, dst, pd.dld(jl), ldd});
              if (l > 1)
                (is_coupling ? gs : gc)
                    .push_back({ku[std::size_t(a)], kv[std::size_t(b)], kvp[std::size_t(i)], et, pd.basis_at(il) + co, dst, lde, pd.ld, ldd});
            }
          }
        }
      }
      copy_items(ctx_, pd.d.data(), C[l].data(), cc);
      copy_items(ctx_, pd.d.data(), coupling, cs);
      if (l > 1) {
        gemm_items(ctx_, op::none, op::none, T(1), pd.u.data(), C[l - 1].data(), T(0), ec.data(), g1);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pd.col_basis(), T(1), C[l].data(), gc);
        gemm_items(ctx_, op::none, op::transpose, T(1), ec.data(), pd.col_basis(), T(1), coupling, gs);
      }
      // Level l - 1 is read no more: its near blocks, bases and cores go, as in the one process's builder.
      C[l - 1] = buffer<T, Space>();
      for (auto* b : {&pd.d, &pd.rd, &pd.u, &pd.v}) *b = buffer<T, Space>();
    }
    // Dense leaves (the leaves' near pairs are the dense blocks, in their order): D + U C V^T, U C one
    // near partner of every own leaf at a time (a block per leaf, not per pair).
    {
      const auto& d = lv_[L_];
      const int sd = S - 1;
      T* dense = H.blocks[std::size_t(sd)].data();
      auto at = [&](int q) {
        const int p = position[std::size_t(sd)][std::size_t(d.pair0 + q)];
        require(p >= 0, "distributed hara: a dense block outside this rank's rows");
        return std::int64_t(p) * m_ * m_;
      };
      std::vector<item_copy> cd;
      int most = 0;
      for (int a = 0; a < d.own; ++a) {
        most = std::max(most, d.f.ptr[a + 1] - d.f.ptr[a]);
        for (int q = d.f.ptr[a]; q < d.f.ptr[a + 1]; ++q) cd.push_back({d.nr[a], d.nc[d.f.col[q]], d.dat[q], at(q), d.dld(a), m_});
      }
      copy_items(ctx_, d.d.data(), dense, cd);
      const std::int64_t block = std::int64_t(d.ld) * d.ld;
      buffer<T, Space> uc(ctx_, std::size_t(std::max(d.own, 1)) * std::size_t(block));
      std::vector<item_gemm> g1, g2;
      for (int j = 0; j < most; ++j) {
        g1.clear(), g2.clear();
        for (int a = 0; a < d.own; ++a) {
          if (d.f.ptr[a] + j >= d.f.ptr[a + 1]) continue;
          const int q = d.f.ptr[a] + j, b = d.f.col[q];
          const std::int64_t w = a * block;
          g1.push_back({d.nr[a], d.kv[b], d.ku[a], d.basis_at(a), cat[L_][q], w, d.ld, std::max(d.ku[a], 1), d.ld});
          g2.push_back({d.nr[a], d.nc[b], d.kv[b], w, d.basis_at(b), at(q), d.ld, d.ld, m_});
        }
        gemm_items(ctx_, op::none, op::none, T(1), d.u.data(), C[L_].data(), T(0), uc.data(), g1);
        gemm_items(ctx_, op::none, op::transpose, T(1), uc.data(), d.col_basis(), T(1), dense, g2);
      }
    }
    build_peer_rows(H);
    return H;
  }

  const distributed::expression<T, Space>& M_;
  const distributed_data<T, Space>& A_;
  const communicator& comm_;
  const partition& D_;
  int c_ = 0;  // the C-level
  std::vector<std::vector<int>> ku_, kv_;  // per level, every node's ranks (U's, V's)
  double norm_ = 0, energy_ = 0;
  int columns_ = 0;
  std::int64_t bytes_sent_ = 0, messages_sent_ = 0;
};

}  // namespace h2expr::detail

namespace h2expr {

// Collective: hara(M, tol) of a distributed operand (a distributed H2 matrix or an expression of them:
// A * A, A + B, ...), distributed like its first matrix, from the same samples, the same construction and
// the same final recompression as in one process (randomized/hara_one_sample_set.hpp), each rank on its
// share. A symmetric operator (A * A of a symmetric A, sums of symmetric ones) gives a symmetric matrix
// with one basis; a general one (A * B, transposes, ...) samples M^T too and gives two bases.
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
  // A symmetric result's shared basis is weighed by its rows alone: half the mass (weights_from_rows_alone).
  detail::distributed_recompress(H, detail::keep_frobenius_share{e * e / std::max(harmonic, 1.0) / (H.symmetric ? 2 : 1)}, crep);
  distributed::h2_matrix<T, Space> P;
  detail::h2_access::data(P) = std::move(H);
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
