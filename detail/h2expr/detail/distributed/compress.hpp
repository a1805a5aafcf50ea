#pragma once
// Distributed compression (section 5 of the distributed H2 paper, its second half): the single
// process's recompression (h2/compress.hpp) on each rank's share, node for node the same stacks:
//   norm estimate (distributed block Krylov, norm.hpp) -> orthogonalize (orthogonalize.hpp) ->
//   weights, a downsweep: the top on every rank, then each rank's subtrees from the top's R factors
//   (no messages; a non-symmetric matrix's shared basis also stacks the blocks of its columns, which
//   live in other ranks' rows: one message per neighbour brings them) -> truncation per node, the
//   ranks of a level made uniform at the largest over the ranks (one allreduce) -> one message per
//   neighbour with the truncation bases of its ghosts, an allgather of the C-level's ->
//   new transfers and leaves, P_t^T S_ts P_s for the own block rows and the top.
// The matrix changes only once every rank has its new share (a failure anywhere leaves it as it was).
#include <h2expr/detail/distributed/norm.hpp>
#include <h2expr/detail/distributed/orthogonalize.hpp>
#include <h2expr/detail/h2/compress.hpp>
#include <h2expr/detail/operations/compress.hpp>
#include <h2expr/detail/primitives/items.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace h2expr::detail {

// What one node's weight stacks below its parent part R_p E_t^T: the blocks of its row (transposed), then
// those of its column (as they are), each from one of two sources, in the single process's order.
struct weight_stack {
  std::int64_t parent = -1, transfer = 0;             // offsets of R_p and of E_t (its k rows of [E_2j; E_2j+1])
  std::vector<std::pair<int, std::int64_t>> row, col;  // (source, offset) of k x k blocks
};

// R factors (k x k per node) of the stacks: Householder QR, or by Gram (gram_factor) where `shift` allows.
template <class T, class Space>
buffer<T, Space> stack_weights(const context_ptr<Space>& ctx, int k, int kp, const std::vector<weight_stack>& nodes,
                               const T* Rp, const T* E, const T* const source[2], double shift) {
  const int count = int(nodes.size());
  buffer<T, Space> R(ctx, std::size_t(count) * k * k);
  if (count == 0 || k == 0) return R;
  int tallest = 1;
  for (const auto& n : nodes) tallest = std::max(tallest, kp + int(n.row.size() + n.col.size()) * k);
  const std::size_t per_node = std::size_t(tallest) * k;
  const int group = std::clamp(int(weights_chunk_bytes<Space>() / (sizeof(T) * per_node)), 1, count);
  buffer<T, Space> W(ctx, std::size_t(group) * per_node), G, root_shift;
  if (shift > 0) {
    std::vector<T> d(std::size_t(k) * k, T(0));
    for (int i = 0; i < k; ++i) d[std::size_t(i) * k + i] = T(std::sqrt(shift));
    root_shift = buffer<T, Space>(ctx, d);
    G = buffer<T, Space>(ctx, std::size_t(group) * k * k);
  }
  for (int first = 0; first < count; first += group) {
    const int last = std::min(count, first + group), n = last - first;
    std::vector<int> m(static_cast<std::size_t>(n));
    int H = 1;
    for (int i = first; i < last; ++i)
      H = std::max(H, m[i - first] = std::max(1, kp + int(nodes[i].row.size() + nodes[i].col.size()) * k));
    fill(*ctx, W.data(), std::size_t(n) * H * k, T(0));
    std::vector<item_copy> part[2][2];  // [source][transposed]
    std::vector<item_gemm> parents;
    for (int i = first; i < last; ++i) {
      const auto& s = nodes[i];
      std::int64_t at = std::int64_t(i - first) * H * k;
      if (kp > 0 && s.parent >= 0) parents.push_back({kp, k, kp, s.parent, s.transfer, at, kp, 2 * k, H});
      at += kp;
      for (const auto& [src, off] : s.row) part[src][1].push_back({k, k, off, at, k, H}), at += k;
      for (const auto& [src, off] : s.col) part[src][0].push_back({k, k, off, at, k, H}), at += k;
    }
    for (int src = 0; src < 2; ++src)
      for (int t = 0; t < 2; ++t)
        if (!part[src][t].empty()) copy_items(ctx, source[src], W.data(), std::move(part[src][t]), t ? op::transpose : op::none);
    gemm_items(ctx, op::none, op::transpose, T(1), Rp, E, T(0), W.data(), std::move(parents));
    T* out = R.data() + std::int64_t(first) * k * k;
    bool factored = false;
    if (shift > 0)
      factored = gram_factor(ctx, W.data(), H, m, k, root_shift.data(), G.data(), out, static_cast<const T*>(nullptr), {});
    if (!factored) qr_strided<T, Space>(ctx, W.data(), std::int64_t(H) * k, H, m, k, out, k, /*form_q=*/false);
  }
  return R;
}

// Node ranks from a level's singular values: choose(l, sigma, k, total) where the chooser weighs the
// level's nodes against each other (total: the squared values of the whole level, over every rank), else
// choose(l, sigma, k).
template <class Choose, class T>
std::vector<int> choose_ranks(const Choose& choose, int l, const std::vector<T>& sigma, int k, double total) {
  if constexpr (requires { choose(l, sigma, k, total); }) return choose(l, sigma, k, total);
  else return choose(l, sigma, k);
}

// Each node's P_t^T (k x k), for project_blocks, which reads the first rows of its factors.
template <class T, class Space>
buffer<T, Space> transposed_nodes(const context_ptr<Space>& ctx, const T* P, std::int64_t count, int k) {
  buffer<T, Space> Pt(ctx, std::size_t(count) * k * k);
  std::vector<item_copy> items;
  for (std::int64_t t = 0; t < count; ++t) items.push_back({k, k, t * k * k, t * k * k, k, k});
  if (k > 0) copy_items(ctx, P, Pt.data(), std::move(items), op::transpose);
  return Pt;
}

// The parts of a distributed matrix that compression replaces (the dense leaves stay), swapped in and
// out whole: compress builds the new ones beside the old, and the error estimate runs the old ones again.
template <class T, class Space>
struct low_rank_parts {
  std::shared_ptr<basis_share<T, Space>> basis, col_basis;  // col_basis: the same object when shared
  std::vector<int> rank, unit;
  std::vector<buffer<T, Space>> top_coupling, blocks;  // blocks: slots c..L
  void swap_with(distributed_data<T, Space>& A) {
    std::swap(basis, A.row_basis);
    std::swap(col_basis, A.col_basis);
    std::swap(rank, A.rank);
    for (std::size_t s = 0; s < blocks.size(); ++s) std::swap(unit[s], A.unit[s]), std::swap(blocks[s], A.blocks[s]);
    std::swap(top_coupling, A.top_coupling);
    build_peer_rows(A);
  }
};

// Steps 2-4 of compression (weights, truncation, projection) on bases orthogonalize() made orthonormal,
// node ranks by `choose` (see choose_ranks); the report's ranks and seconds. Returns the old parts
// (compress's error estimate runs them once more).
template <class T, class Space, class Choose>
low_rank_parts<T, Space> distributed_recompress(distributed_data<T, Space>& A, const Choose& choose, compress_report& rep,
                            std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now()) {
  using clock = std::chrono::steady_clock;
  const communicator& comm = *A.comm;
  const partition& D = A.dist;
  const auto& ctx = A.ctx;
  const int L = A.depth(), c = D.c, S = D.slots();
  auto lap = [&](double compress_report::*slot) {  // the host reads the time: it waits for the stream
    rep.*slot += seconds_since(*ctx, t0);
    t0 = clock::now();
  };
  gram_weights gram;
  if constexpr (requires { choose.gram(0); }) gram = choose.gram(L);
  auto resolve = [&](int l) {
    if constexpr (requires { choose.threshold(0); }) return choose.threshold(l);
    else return (void)l, 0.0;
  };
  // Two bases (U for the rows, V for the columns) are weighed and truncated each on its own side: U by
  // its rows' blocks, V by its columns'. A shared basis of a non-symmetric matrix carries both.
  const bool two = A.row_basis != A.col_basis, both = !A.symmetric && !two;
  const int sides = two ? 2 : 1;
  const std::vector<int> k = A.rank;
  const basis_share<T, Space>* B[2] = {A.row_basis.get(), A.col_basis.get()};
  const auto& blocks = A.structure.blocks();
  auto shift_of = [&](int l, int side) {  // the single process's choice, from the whole level's tallest stack
    const auto& lv = blocks.coupling[l];
    int tallest = 0;
    for (int t = 0; t < lv.level_size(); ++t) {
      const int rows = lv.row_ptr[t + 1] - lv.row_ptr[t], cols = lv.col_ptr[t + 1] - lv.col_ptr[t];
      tallest = std::max(tallest, (l > 0 ? k[l - 1] : 0) + (side == 1 ? cols : rows + (both ? cols : 0)) * k[l]);
    }
    return gram.template shift<T>(tallest, k[l]);
  };

  // A non-symmetric matrix: the blocks of the own columns that other ranks' rows hold, one message per
  // neighbour, every level's one after the other, in the order of the blocks' global indices on both sides.
  std::vector<buffer<T, Space>> col_received(static_cast<std::size_t>(S - 1));
  std::vector<std::vector<std::pair<int, std::int64_t>>> col_index(static_cast<std::size_t>(S - 1));  // (global block, position)
  if (both || two) {
    std::vector<message<T, Space>> sends, receives;
    pending messages;
    std::vector<std::vector<int>> expected(A.peers.size());  // per peer, per slot: the global blocks it sends
    std::vector<std::vector<std::int64_t>> expected_at(A.peers.size());
    const rank_failure packed = rank_failure::of([&] {
      for (std::size_t i = 0; i < A.peers.size(); ++i) {
        const auto& p = A.peers[i];
        std::vector<std::vector<item_copy>> items(static_cast<std::size_t>(S - 1));
        std::int64_t n_send = 0, n_receive = 0;
        expected_at[i].push_back(0);
        for (int s = 0; s + 1 < S; ++s) {
          const int l = c + s;
          const std::int64_t kk = std::int64_t(k[l]) * k[l];
          // Sent: the own off-diagonal blocks in p's columns (this rank's ghosts that p owns), as stored.
          const auto& sp = A.split_host[s];
          const auto [g0, g1] = p.receive[s];
          for (int j = 0; j < sp.off.blocks(); ++j)
            if (sp.off.col[j] >= g0 && sp.off.col[j] < g1)
              items[s].push_back({k[l], k[l], (sp.diag.blocks() + j) * kk, n_send, k[l], k[l]}), n_send += kk;
          // Received: p's blocks in this rank's columns, in p's storage order (that of the global index).
          const auto& lv = blocks.coupling[l];
          for (int t = D.begin(l, p.rank); t < D.end(l, p.rank); ++t)
            for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b)
              if (D.owns(l, lv.col[b])) expected[i].push_back(b), n_receive += kk;
          expected_at[i].push_back(std::int64_t(expected[i].size()));
        }
        require(n_send <= INT32_MAX && n_receive <= INT32_MAX, "distributed compress: a message of more than 2^31 - 1 values");
        sends.emplace_back(ctx, std::size_t(n_send));
        receives.emplace_back(ctx, std::size_t(n_receive));
        for (int s = 0; s + 1 < S; ++s)
          if (!items[s].empty()) copy_items(ctx, A.blocks[s].data(), sends.back().data(), std::move(items[s]));
        sends.back().before_send();
        receives.back().before_receive();  // after before_send's wait: nothing left to wait for
      }
    });
    comm.agree("distributed compress", {}, packed);
    for (std::size_t i = 0; i < A.peers.size(); ++i) {
      if (receives[i].size()) messages.receive(comm, receives[i].mpi(), receives[i].size(), A.peers[i].rank);
      if (sends[i].size()) {
        messages.send(comm, sends[i].mpi(), sends[i].size(), A.peers[i].rank);
        rep.bytes_sent += std::int64_t(sends[i].size() * sizeof(T)), ++rep.messages_sent;
      }
    }
    const rank_failure arrived = rank_failure::of([&] {
      messages.wait();
      for (int s = 0; s + 1 < S; ++s) {
        const std::int64_t kk = std::int64_t(k[c + s]) * k[c + s];
        std::int64_t total = 0;
        for (std::size_t i = 0; i < A.peers.size(); ++i) total += expected_at[i][s + 1] - expected_at[i][s];
        col_received[s] = buffer<T, Space>(ctx, std::size_t(total * kk));
      }
      std::vector<std::int64_t> filled(static_cast<std::size_t>(S - 1), 0);
      for (std::size_t i = 0; i < A.peers.size(); ++i) {
        receives[i].after_receive();
        std::int64_t at = 0;
        for (int s = 0; s + 1 < S; ++s) {
          const std::int64_t kk = std::int64_t(k[c + s]) * k[c + s], n = expected_at[i][s + 1] - expected_at[i][s];
          for (std::int64_t j = 0; j < n; ++j)
            col_index[s].emplace_back(expected[i][std::size_t(expected_at[i][s] + j)], filled[s] + j);
          if (n > 0) copy(*ctx, receives[i].data() + at, col_received[s].data() + filled[s] * kk, std::size_t(n * kk));
          at += n * kk, filled[s] += n;
        }
      }
      for (auto& v : col_index) std::sort(v.begin(), v.end());
    });
    comm.agree("distributed compress", {}, arrived);
  }

  // Weights and truncation, per side: the top on every rank, then the own subtrees. Node ranks kept:
  // top levels whole, own levels this rank's.
  std::vector<buffer<T, Space>> Ptop[2], P[2];
  std::vector<std::vector<int>> kept[2];
  std::vector<std::vector<T>> sigma[2];
  for (int b = 0; b < 2; ++b)
    Ptop[b].resize(static_cast<std::size_t>(c)), P[b].resize(static_cast<std::size_t>(L + 1)),
        kept[b].resize(static_cast<std::size_t>(L + 1)), sigma[b].resize(static_cast<std::size_t>(L + 1));
  std::vector<std::int64_t> r_max(static_cast<std::size_t>(L + 1), 0);
  const bool with_rows[2] = {true, false}, with_cols[2] = {both, true};
  const rank_failure weighed = rank_failure::of([&] {
    for (int b = 0; b < sides; ++b) {
      std::vector<buffer<T, Space>> Rtop(static_cast<std::size_t>(c)), R(static_cast<std::size_t>(L + 1));
      for (int l = 0; l < c; ++l) {
        const auto& lv = blocks.coupling[l];
        std::vector<weight_stack> nodes(static_cast<std::size_t>(1) << l);
        for (int t = 0; t < (1 << l); ++t) {
          auto& n = nodes[t];
          if (l > 0) n.parent = std::int64_t(t / 2) * k[l - 1] * k[l - 1], n.transfer = std::int64_t(t / 2) * 2 * k[l] * k[l - 1] + (t & 1) * k[l];
          if (with_rows[b])
            for (int e = lv.row_ptr[t]; e < lv.row_ptr[t + 1]; ++e) n.row.emplace_back(0, std::int64_t(e) * k[l] * k[l]);
          if (with_cols[b])
            for (int e = lv.col_ptr[t]; e < lv.col_ptr[t + 1]; ++e) n.col.emplace_back(0, std::int64_t(lv.block_of[e]) * k[l] * k[l]);
        }
        const T* sources[2] = {A.top_coupling[l].data(), nullptr};
        Rtop[l] = stack_weights<T, Space>(ctx, k[l], l > 0 ? k[l - 1] : 0, nodes, l > 0 ? Rtop[l - 1].data() : nullptr,
                                          B[b]->transfers[l].data(), sources, shift_of(l, b));
        Ptop[b][l] = node_svd(ctx, Rtop[l], 1 << l, k[l], resolve(l), sigma[b][l]);
      }
      for (int s = 0; s + 1 < S; ++s) {
        const int l = c + s, n_own = D.count(l), b0 = D.begin(l);
        const std::int64_t kk = std::int64_t(k[l]) * k[l];
        const auto& lv = blocks.coupling[l];
        const auto& sp = A.split_host[s];
        std::vector<weight_stack> nodes(static_cast<std::size_t>(n_own));
        for (int t = 0; t < n_own; ++t) {
          auto& n = nodes[t];
          const int g = b0 + t;
          if (l > 0) {
            const int kp = k[l - 1];
            // The parent: in the top (l = c; every parent, by its global index) or this rank's (l > c,
            // whose own nodes start at an even index).
            const int parent = l == c ? g / 2 : t / 2;
            n.parent = std::int64_t(parent) * kp * kp, n.transfer = std::int64_t(parent) * 2 * k[l] * kp + (g & 1) * k[l];
          }
          if (with_rows[b]) {  // the blocks of row t in their global order: the diagonal and off-diagonal parts merged
            std::vector<std::pair<int, std::int64_t>> row;
            for (int e = sp.diag.row_ptr[t]; e < sp.diag.row_ptr[t + 1]; ++e) row.emplace_back(sp.diag_global[e], e);
            for (int e = sp.off.row_ptr[t]; e < sp.off.row_ptr[t + 1]; ++e) row.emplace_back(sp.off_global[e], sp.diag.blocks() + e);
            std::sort(row.begin(), row.end());
            for (const auto& [global, at] : row) n.row.emplace_back(0, at * kk);
          }
          if (with_cols[b])
            for (int e = lv.col_ptr[g]; e < lv.col_ptr[g + 1]; ++e) {
              const int blk = lv.block_of[e];
              if (D.owns(l, lv.row_of[e])) {
                const auto it = std::lower_bound(sp.diag_global.begin(), sp.diag_global.end(), blk);
                n.col.emplace_back(0, std::int64_t(it - sp.diag_global.begin()) * kk);
              } else {
                const auto it = std::lower_bound(col_index[s].begin(), col_index[s].end(), std::pair<int, std::int64_t>(blk, 0));
                require(it != col_index[s].end() && it->first == blk, "distributed compress: a column block did not arrive");
                n.col.emplace_back(1, it->second * kk);
              }
            }
        }
        const T* sources[2] = {A.blocks[s].data(), col_received[s].data()};
        const T* Rp = l == 0 ? nullptr : l == c ? Rtop[l - 1].data() : R[l - 1].data();
        R[l] = stack_weights<T, Space>(ctx, k[l], l > 0 ? k[l - 1] : 0, nodes, Rp, B[b]->transfers[l].data(), sources, shift_of(l, b));
        P[b][l] = node_svd(ctx, R[l], n_own, k[l], resolve(l), sigma[b][l]);
      }
    }
  });
  comm.agree("distributed compress", {}, weighed);
  // Node ranks: a level's squared singular values summed over every rank (for choosers that weigh a
  // level's nodes against each other), then each rank's; the level's rank is its largest node's (of
  // either basis).
  for (int b = 0; b < sides; ++b) {
    std::vector<double> total(static_cast<std::size_t>(L + 1), 0.0);
    for (int l = c; l <= L; ++l)
      for (T v : sigma[b][l]) total[l] += double(v) * double(v);
    comm.sum_in_rank_order(total.data(), int(total.size()));
    for (int l = 0; l < c; ++l)
      for (T v : sigma[b][l]) total[l] += double(v) * double(v);
    for (int l = 0; l <= L; ++l) {
      const int nodes = l < c ? 1 << l : D.count(l);
      kept[b][l] = k[l] > 0 ? choose_ranks(choose, l, sigma[b][l], k[l], total[l]) : std::vector<int>(static_cast<std::size_t>(nodes), 0);
      buffer<T, Space>& Pl = l < c ? Ptop[b][l] : P[b][l];
      if (k[l] > 0 && nodes > 0) zero_trailing_columns<T, Space>(ctx, Pl.data(), std::int64_t(k[l]) * k[l], k[l], k[l], k[l], kept[b][l]);
      for (int v : kept[b][l]) r_max[l] = std::max<std::int64_t>(r_max[l], v);
    }
  }
  lap(&compress_report::seconds_weights);
  comm.max(r_max);  // a level's rank: its largest node's, over every rank
  std::vector<int> r(r_max.begin(), r_max.end());

  // The truncation bases others need: the ghosts' of the column side (one message per neighbour) and
  // the C-level's of every side (allgather).
  const int cb = sides - 1;  // the side whose bases the columns of a block row use
  low_rank_parts<T, Space> next;
  std::vector<buffer<T, Space>> Pg(static_cast<std::size_t>(S - 1));  // per own level: own nodes', then ghosts'
  factor_exchange<T, Space> exchange;
  const rank_failure packed = rank_failure::of([&] {
    for (int s = 0; s + 1 < S; ++s) {
      const int l = c + s;
      const std::int64_t kk = std::int64_t(k[l]) * k[l];
      Pg[s] = buffer<T, Space>(ctx, std::size_t(D.count(l) + A.splits[s].ghosts) * kk);
      require(Pg[s].size() <= std::size_t(INT32_MAX), "distributed compress: a rank's bases of one level pass 2^31 - 1 values");
      if (D.count(l) > 0) copy(*ctx, P[cb][l].data(), Pg[s].data(), std::size_t(D.count(l) * kk));
    }
    exchange.pack(A, P, sides, k[c], "distributed compress");
  });
  comm.agree("distributed compress", {}, packed);
  exchange.post(A, rep);

  const rank_failure built = rank_failure::of([&] {
    // New bases: leaves U_t P_t (own), transfers P_c^T E_c P_p (own parents below c, all above).
    const int m = A.m_max;
    for (int b = 0; b < sides; ++b) {
      buffer<T, Space> Pc;  // every C-level node's
      if (c > 0) Pc = exchange.top.gathered(A, b);
      auto basis = std::make_shared<basis_share<T, Space>>();
      basis->leaves = buffer<T, Space>(ctx, std::size_t(D.count(L)) * m * r[L]);
      if (r[L] > 0 && D.count(L) > 0)
        gemm_strided_batched(*ctx, op::none, op::none, m, r[L], k[L], T(1), B[b]->leaves.data(), m, std::int64_t(m) * k[L],
                             P[b][L].data(), k[L], std::int64_t(k[L]) * k[L], T(0), basis->leaves.data(), m,
                             std::int64_t(m) * r[L], D.count(L));
      basis->transfers.resize(L + 1);
      for (int l = 1; l <= L; ++l) {
        const int kc = k[l], kp = k[l - 1], rc = r[l], rp = r[l - 1];
        const int parents = l > c ? D.count(l - 1) : 1 << (l - 1);
        const T* Pchild = l > c ? P[b][l].data() : l == c ? Pc.data() : Ptop[b][l].data();
        const T* Pparent = l - 1 >= c ? P[b][l - 1].data() : Ptop[b][l - 1].data();
        basis->transfers[l] = buffer<T, Space>(ctx, std::size_t(parents) * 2 * rc * rp);
        if (rc == 0 || rp == 0 || parents == 0) continue;
        buffer<T, Space> tmp(ctx, std::size_t(parents) * 2 * kc * rp);
        for (int h = 0; h < 2; ++h) {
          gemm_strided_batched(*ctx, op::none, op::none, kc, rp, kp, T(1), B[b]->transfers[l].data() + h * kc, 2 * kc,
                               std::int64_t(2) * kc * kp, Pparent, kp, std::int64_t(kp) * kp, T(0), tmp.data() + h * kc, 2 * kc,
                               std::int64_t(2) * kc * rp, parents);
          gemm_strided_batched(*ctx, op::transpose, op::none, rc, rp, kc, T(1), Pchild + std::int64_t(h) * kc * kc, kc,
                               std::int64_t(2) * kc * kc, tmp.data() + h * kc, 2 * kc, std::int64_t(2) * kc * rp, T(0),
                               basis->transfers[l].data() + h * rc, 2 * rc, std::int64_t(2) * rc * rp, parents);
        }
      }
      (b == 0 ? next.basis : next.col_basis) = std::move(basis);
    }
    if (!two) next.col_basis = next.basis;
    lap(&compress_report::seconds_truncation);

    // P_t^T S_ts P_s: the top's blocks, then the own block rows (columns: own, then ghosts).
    std::vector<T*> into;
    for (auto& g : Pg) into.push_back(g.data());
    exchange.ghosts.finish(A, into);
    next.top_coupling.resize(static_cast<std::size_t>(c));
    for (int l = 0; l < c; ++l) {
      const auto& lv = blocks.coupling[l];
      std::vector<int> rows(static_cast<std::size_t>(lv.blocks()));
      for (int t = 0; t < lv.level_size(); ++t) std::fill(rows.begin() + lv.row_ptr[t], rows.begin() + lv.row_ptr[t + 1], t);
      const auto Pt = transposed_nodes(ctx, Ptop[0][l].data(), std::int64_t(1) << l, k[l]);
      const auto Qt = two ? transposed_nodes(ctx, Ptop[1][l].data(), std::int64_t(1) << l, k[l]) : buffer<T, Space>();
      next.top_coupling[l] = project_blocks(ctx, A.top_coupling[l].data(), Pt.data(), (two ? Qt : Pt).data(), rows, lv.col, k[l], r[l]);
    }
    next.blocks.resize(static_cast<std::size_t>(S - 1));
    next.unit.resize(static_cast<std::size_t>(S - 1));
    for (int s = 0; s + 1 < S; ++s) {
      const int l = c + s, n = D.count(l);
      const auto [rows, cols] = slot_blocks(A, s);
      const auto Qt = transposed_nodes(ctx, Pg[s].data(), std::int64_t(n) + A.splits[s].ghosts, k[l]);
      const auto Pt = two ? transposed_nodes(ctx, P[0][l].data(), std::int64_t(n), k[l]) : buffer<T, Space>();
      next.blocks[s] = project_blocks(ctx, A.blocks[s].data(), (two ? Pt : Qt).data(), Qt.data(), rows, cols, k[l], r[l]);
      next.unit[s] = r[l];
    }
    next.rank = r;
  });
  comm.agree("distributed compress", {}, built);
  lap(&compress_report::seconds_projection);

  next.swap_with(A);  // A holds the compressed parts, `next` the old ones

  // The report: node ranks over every rank (the top's counted once) and over the nodes of both bases.
  rep.node_rank_min.assign(L + 1, 0), rep.node_rank_max.assign(L + 1, 0), rep.node_rank_avg.assign(L + 1, 0);
  std::vector<std::int64_t> low(static_cast<std::size_t>(L + 1), INT32_MIN);
  std::vector<double> sums(static_cast<std::size_t>(L + 1), 0.0);
  for (int b = 0; b < sides; ++b)
    for (int l = 0; l <= L; ++l) {
      const bool counted = l >= c || D.rank == 0;
      for (int v : kept[b][l]) {
        low[l] = std::max<std::int64_t>(low[l], -v);
        if (counted) sums[l] += v;
      }
    }
  comm.max(low);
  comm.sum_in_rank_order(sums.data(), int(sums.size()));
  for (int l = 0; l <= L; ++l) {
    rep.node_rank_min[l] = low[l] == INT32_MIN ? 0 : int(-low[l]);
    rep.node_rank_max[l] = r[l];
    rep.node_rank_avg[l] = sums[l] / double(sides * (std::int64_t(1) << l));
  }
  rep.ranks_after = A.rank;
  return next;
}

template <class T, class Space>
compress_report distributed_compress(distributed_data<T, Space>& A, double tol, const compress_options& options = {}) {
  using clock = std::chrono::steady_clock;
  require<missing_structure>(A.comm != nullptr, "distributed compress: the matrix is empty (default-constructed)");
  const communicator& comm = *A.comm;
  const auto& ctx = A.ctx;
  const int L = A.depth();
  rank_failure bad;
  if (!(std::isfinite(tol) && tol > 0 && tol < 1))
    bad = {rank_failure::tolerance, "compress: the tolerance must be in (0, 1), got " + std::to_string(tol)};
  comm.agree("distributed compress",
             {{"the tolerance", bits_of(tol)}, {"estimate_error", options.estimate_error}, {"the depth", L}}, bad);
  compress_report rep;
  auto t0 = clock::now();
  auto lap = [&](double compress_report::*slot) {  // the host reads the time: it waits for the stream
    rep.*slot += seconds_since(*ctx, t0);
    t0 = clock::now();
  };
  rep.memory_before = A.bytes();
  rep.ranks_before = A.rank;
  rep.norm_estimate = distributed_norm_estimate(A);
  rep.orthogonalized = !A.row_basis->orthonormal || !A.col_basis->orthonormal;
  if (rep.orthogonalized) {
    const auto traffic = distributed_orthogonalize(A);
    rep.bytes_sent += traffic.bytes_sent, rep.messages_sent += traffic.messages_sent, rep.allgather_bytes += traffic.allgather_bytes;
  }
  lap(&compress_report::seconds_orthogonalize);

  // compress()'s threshold and chooser (operations/compress.hpp), so that the ranks are one process's.
  const double eps = tol * rep.norm_estimate / (2 * std::sqrt(double(L + 1)));
  auto old = distributed_recompress(A, keep_above{eps, rep.norm_estimate}, rep, t0);
  if (options.estimate_error) {
    // ||A_before - A_after||_2: the old parts swapped back in for their product (and out again, whatever happens).
    struct lend {
      low_rank_parts<T, Space>& old;
      distributed_data<T, Space>& A;
      lend(low_rank_parts<T, Space>& o, distributed_data<T, Space>& a) : old(o), A(a) { old.swap_with(A); }
      ~lend() { old.swap_with(A); }
    };
    const index rows = index(A.local_indices.size());
    const double diff = krylov_two_norm<T, Space>(
        ctx, rows, rows,
        [&](op trans, const_view<T, Space> x, view<T, Space> y) {
          {
            lend before(old, A);
            distributed_hgemv(A, trans, T(1), x, T(0), y);
          }
          distributed_hgemv(A, trans, T(-1), x, T(1), y);
        },
        777, 4, false, 4, distributed_vectors{comm, A.local_indices, A.structure.rows()});
    rep.error_estimate = rep.norm_estimate > 0 ? diff / rep.norm_estimate : diff;
  }
  rep.memory_after = A.bytes();
  if (options.report) *options.report = rep;
  return rep;
}

}  // namespace h2expr::detail
