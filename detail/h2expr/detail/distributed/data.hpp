#pragma once
// What one rank of a distributed H2 matrix holds: its share (partition in distribution.hpp) in the layouts of
// h2_data, so that the products run the single-process batched phases on it, plus the replicated top
// and the plans of its exchanges with other ranks.
#include <h2expr/detail/distributed/communicator.hpp>
#include <h2expr/detail/distributed/distribution.hpp>
#include <h2expr/detail/h2/h2_data.hpp>

#include <cstdint>
#include <memory>
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

}  // namespace h2expr::detail
