#pragma once
// What one rank of a distributed H2 matrix holds: its share (partition in distribution.hpp) in the layouts of
// h2_data, so that the products run the single-process batched phases on it, plus the replicated top
// and the plans of its exchanges with other ranks.
#include <h2expr/detail/distributed/communicator.hpp>
#include <h2expr/detail/distributed/distribution.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/primitives/batched.hpp>  // gather_rows

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace h2expr::detail {

// One basis tree's share: the own leaves (m_max x k_L each, in order), and transfers[l] ([E_2j; E_2j+1]
// per parent j of level l - 1, 2 k_l x k_(l-1) each): the own parents for l > c, all for l <= c.
template <class T, class Space>
struct basis_share {
  buffer<T, Space> leaves;
  std::vector<buffer<T, Space>> transfers;
  bool orthonormal = false;  // set by orthogonalize (compress then skips it), as basis_tree's
  std::size_t bytes() const {
    std::size_t s = leaves.size();
    for (const auto& t : transfers) s += t.size();
    return s * sizeof(T);
  }
};

// A split level's index arrays in the space (diag and off, both orderings).
template <class Space>
struct split_arrays {
  level_arrays<Space> diag, off;
  int diag_blocks = 0, ghosts = 0;
  split_arrays() = default;
  split_arrays(const context_ptr<Space>& ctx, const split_level& s)
      : diag(ctx, s.diag), off(ctx, s.off), diag_blocks(s.diag.blocks()), ghosts(int(s.ghosts.size())) {}
};

template <class T, class Space>
struct distributed_data {
  std::shared_ptr<const communicator> comm;
  partition dist;
  context_ptr<Space> ctx;
  ::h2expr::structure<T> structure;  // the whole structure, on every rank
  int m_max = 0;
  std::vector<int> rank;  // per level, uniform
  bool symmetric = false;
  std::shared_ptr<basis_share<T, Space>> row_basis, col_basis;  // the same object when U = V
  // Levels above c: every block (global row order) and the level's index arrays.
  std::vector<buffer<T, Space>> top_coupling;
  std::vector<level_arrays<Space>> top_arrays;
  int top_level = 0;  // the coarsest level with coupling blocks (the sweeps stop there)
  // Slots (levels c..L, then the dense leaves): this rank's blocks [diag | off], their arrays, and the
  // rows per node (k_l, or m_max for the dense leaves).
  std::vector<buffer<T, Space>> blocks;
  std::vector<split_level> split_host;  // on the host, for operations that rebuild the blocks
  std::vector<split_arrays<Space>> splits;
  std::vector<int> unit;
  // Exchanges: per peer, the plan and the own rows it needs, every slot's one after the other.
  std::vector<peer_plan> peers;
  std::vector<buffer<int, Space>> peer_rows;
  std::vector<std::vector<std::int64_t>> peer_row_at;  // per peer, slots + 1 offsets into peer_rows
  buffer<int, Space> padded_to_local;  // own padded leaf rows -> this rank's row (its order of local_indices), or -1
  std::vector<index> local_indices;    // the user's indices of this rank's rows

  int depth() const { return structure.depth(); }
  std::size_t bytes() const {
    std::size_t s = row_basis->bytes() + (col_basis != row_basis ? col_basis->bytes() : 0);
    for (const auto& b : top_coupling) s += b.size() * sizeof(T);
    for (const auto& b : blocks) s += b.size() * sizeof(T);
    return s;
  }
};

// The own rows each peer's messages carry in a product (node n of slot s: rows n unit[s] ..), for the
// current ranks: built with the matrix, rebuilt when an operation changes its ranks.
template <class T, class Space>
void build_peer_rows(distributed_data<T, Space>& d) {
  d.peer_rows.clear(), d.peer_row_at.clear();
  for (int s = 0; s < d.dist.slots(); ++s)
    require(std::int64_t(d.dist.count(d.dist.slot_level(s))) * d.unit[s] <= INT32_MAX,
            "distributed: a rank's rows of one level pass 2^31 - 1");
  for (const auto& p : d.peers) {
    std::vector<int> rows;
    std::vector<std::int64_t> at{0};
    for (int s = 0; s < d.dist.slots(); ++s) {
      for (int node : p.send[s])
        for (int r = 0; r < d.unit[s]; ++r) rows.push_back(node * d.unit[s] + r);
      at.push_back(std::int64_t(rows.size()));
    }
    d.peer_rows.emplace_back(d.ctx, rows);
    d.peer_row_at.push_back(std::move(at));
  }
}

// The C-level's k x k factors (R factors, truncation bases) of every side, from every rank to every
// rank (the top above the C-level is computed on each). pack() runs inside a phase whose failures the
// caller agrees on, post() (the allgathers) after the agreement, gathered() after that.
template <class T, class Space>
class c_level_gather {
 public:
  // factors[b]: side b's own C-level nodes' factors, k x k each. Nothing to do when the C-level is the root.
  void pack(const distributed_data<T, Space>& A, int k, const std::vector<const buffer<T, Space>*>& factors,
            const std::string& what) {
    const partition& D = A.dist;
    if (D.c == 0) return;
    const std::int64_t kk = std::int64_t(k) * k;
    require((std::int64_t(1) << D.c) * kk <= INT_MAX, what + ": the C-level factors pass 2^31 - 1 values");
    counts_.assign(std::size_t(D.ranks), 0);
    for (int q = 0; q < D.ranks; ++q) counts_[std::size_t(q)] = int((D.first[q + 1] - D.first[q]) * kk);
    for (const auto* f : factors) {
      mine_.emplace_back(A.ctx, std::size_t(counts_[std::size_t(D.rank)]));
      all_.emplace_back(A.ctx, (std::size_t(1) << D.c) * kk);
      if (mine_.back().size()) copy(*A.ctx, f->data(), mine_.back().data(), mine_.back().size());
      mine_.back().before_send();
      all_.back().before_receive();  // after before_send's wait: nothing left to wait for
    }
  }
  void post(const distributed_data<T, Space>& A, std::int64_t& allgather_bytes) {
    for (std::size_t b = 0; b < mine_.size(); ++b) {
      A.comm->allgather(mine_[b].mpi(), counts_, all_[b].mpi());
      allgather_bytes += std::int64_t(mine_[b].size() * sizeof(T));
    }
  }
  // Side b's factors of every C-level node, in node order.
  buffer<T, Space> gathered(const distributed_data<T, Space>& A, int b) {
    all_[std::size_t(b)].after_receive();
    buffer<T, Space> f(A.ctx, all_[std::size_t(b)].size());
    copy(*A.ctx, all_[std::size_t(b)].data(), f.data(), f.size());
    return f;
  }

 private:
  std::vector<int> counts_;
  std::vector<message<T, Space>> mine_, all_;
};

// The own nodes' k_l x k_l factors (R factors, truncation bases) of levels c.. that each peer's blocks
// need, one message per peer with every level's one after the other (the product's plans), and the
// peers' into this rank's ghost places: level c + s's after its own nodes. pack() and finish() run inside
// phases whose failures the caller agrees on; post() between them.
template <class T, class Space>
class ghost_factor_exchange {
 public:
  // factors[s]: level c + s's own nodes' factors (k x k each, own nodes first), s = 0 .. slots - 2.
  void pack(const distributed_data<T, Space>& A, const std::vector<const buffer<T, Space>*>& factors) {
    const auto& k = A.rank;
    const int c = A.dist.c, S = A.dist.slots();
    for (const auto& p : A.peers) {
      std::vector<int> rows;
      std::int64_t ghosts = 0;
      for (int s = 0; s + 1 < S; ++s) {
        const std::int64_t kk = std::int64_t(k[c + s]) * k[c + s];
        for (int node : p.send[s])
          for (std::int64_t i = 0; i < kk; ++i) rows.push_back(int(std::int64_t(node) * kk + i));
        ghosts += std::int64_t(p.receive[s].second - p.receive[s].first) * kk;
      }
      require(ghosts <= INT32_MAX && rows.size() <= std::size_t(INT32_MAX), "distributed: a message of more than 2^31 - 1 values");
      sends_.emplace_back(A.ctx, rows.size());
      receives_.emplace_back(A.ctx, std::size_t(ghosts));
      const buffer<int, Space> map(A.ctx, rows);
      std::int64_t at = 0;
      for (int s = 0; s + 1 < S; ++s) {  // slot by slot: each level's factors in their own buffer
        const std::int64_t kk = std::int64_t(k[c + s]) * k[c + s], n = std::int64_t(p.send[s].size()) * kk;
        if (n > 0)
          gather_rows(*A.ctx, map.data() + at, n, factors[s]->data(), std::max<std::int64_t>(std::int64_t(factors[s]->size()), 1),
                      sends_.back().data() + at, n, 1);
        at += n;
      }
      sends_.back().before_send();
      receives_.back().before_receive();  // after before_send's wait: nothing left to wait for
    }
  }
  // Non-blocking: every message posted; bytes and messages sent added to the counts.
  void post(const distributed_data<T, Space>& A, std::int64_t& bytes_sent, std::int64_t& messages_sent) {
    for (std::size_t i = 0; i < A.peers.size(); ++i) {
      if (receives_[i].size()) messages_.receive(*A.comm, receives_[i].mpi(), receives_[i].size(), A.peers[i].rank);
      if (sends_[i].size()) {
        messages_.send(*A.comm, sends_[i].mpi(), sends_[i].size(), A.peers[i].rank);
        bytes_sent += std::int64_t(sends_[i].size() * sizeof(T)), ++messages_sent;
      }
    }
  }
  // ghosts[s]: level c + s's factors, own nodes first; the peers' land after them.
  void finish(const distributed_data<T, Space>& A, const std::vector<T*>& ghosts) {
    const auto& k = A.rank;
    const int c = A.dist.c, S = A.dist.slots();
    messages_.wait();
    for (std::size_t i = 0; i < A.peers.size(); ++i) {
      receives_[i].after_receive();
      std::int64_t at = 0;
      for (int s = 0; s + 1 < S; ++s) {
        const std::int64_t kk = std::int64_t(k[c + s]) * k[c + s];
        const auto [g0, g1] = A.peers[i].receive[s];
        const std::int64_t n = std::int64_t(g1 - g0) * kk;
        if (n > 0) copy(*A.ctx, receives_[i].data() + at, ghosts[s] + (std::int64_t(A.dist.count(c + s)) + g0) * kk, std::size_t(n));
        at += n;
      }
    }
  }

 private:
  std::vector<message<T, Space>> sends_, receives_;
  pending messages_;  // declared last: destroyed first, so no request outlives its buffers
};

// The blocks of own level c + s in their stored order (the diagonal part's, then the off part's): each
// one's row (an own node) and column in the local numbering (own nodes, then the ghosts after them).
template <class T, class Space>
std::pair<std::vector<int>, std::vector<int>> slot_blocks(const distributed_data<T, Space>& A, int s) {
  const int n = A.dist.count(A.dist.c + s);
  const auto& sp = A.split_host[std::size_t(s)];
  std::vector<int> rows, cols;
  for (const auto* part : {&sp.diag, &sp.off})
    for (int t = 0; t < n; ++t)
      for (int b = part->row_ptr[t]; b < part->row_ptr[t + 1]; ++b)
        rows.push_back(t), cols.push_back(part == &sp.diag ? part->col[b] : n + part->col[b]);
  return {std::move(rows), std::move(cols)};
}

// What a level-by-level basis operation (orthogonalize, compress) shares of its per-node factors F[b][l]
// (side b, level l; k_l x k_l per own node): the columns' side's of levels c.. with the peers whose
// blocks need them, and every side's C-level ones with all ranks. pack() runs inside a phase whose
// failures the caller agrees on, post() after the agreement; then ghosts.finish() and top.gathered().
template <class T, class Space>
struct factor_exchange {
  ghost_factor_exchange<T, Space> ghosts;
  c_level_gather<T, Space> top;

  void pack(const distributed_data<T, Space>& A, const std::vector<buffer<T, Space>>* F, int sides, int k_c,
            const std::string& what) {
    const int c = A.dist.c, S = A.dist.slots();
    std::vector<const buffer<T, Space>*> own, c_level;
    for (int s = 0; s + 1 < S; ++s) own.push_back(&F[sides - 1][c + s]);
    ghosts.pack(A, own);
    for (int b = 0; b < sides; ++b) c_level.push_back(&F[b][c]);
    top.pack(A, k_c, c_level, what);
  }
  // The messages and the allgathers, their traffic added to t's counts.
  template <class Traffic>
  void post(const distributed_data<T, Space>& A, Traffic& t) {
    ghosts.post(A, t.bytes_sent, t.messages_sent);
    top.post(A, t.allgather_bytes);
  }
};

}  // namespace h2expr::detail
