#pragma once
// How an H2 matrix splits over the ranks of a communicator (section 2.2 of the distributed H2
// paper): the levels at and below the C-level c are split into block rows. Rank q owns the C-level
// nodes [first[q], first[q + 1]) and their subtrees: its rows of the matrix, its nodes of both basis
// trees, the coupling and dense blocks of its block rows. The top (transfers into level c, coupling
// blocks above it) is small and kept on every rank, which computes it redundantly after one
// allgather: one collective where the paper gathers to a root and scatters back.
//
// Built on every rank alike from the structure (which every rank holds): each rank knows what every
// other one needs from it, so the exchange plans need no communication. Host data only.
#include <h2expr/detail/structure/matrix_tree.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

// The blocks of this rank's block rows at one level, split by where their column node lives: here
// (diag, columns as local indices) or elsewhere (off, columns as indices into `ghosts`, sorted by node
// and so grouped by owner). The numbers are stored [diag | off], each in its own row order; block
// diag_global[i] / off_global[i] is block i's index in the level's global row order.
struct split_level {
  block_sparse_level diag, off;
  std::vector<int> ghosts;
  std::vector<int> diag_global, off_global;
};

// What one rank sends to and receives from another, per slot (the levels c..L of the coupling, then
// the dense leaves): the own nodes (local indices) the peer needs, and the range of this rank's ghosts
// that the peer owns.
struct peer_plan {
  int rank = 0;
  std::vector<std::vector<int>> send;
  std::vector<std::pair<int, int>> receive;
  bool empty() const {
    for (std::size_t s = 0; s < send.size(); ++s)
      if (!send[s].empty() || receive[s].second > receive[s].first) return false;
    return true;
  }
};

struct partition {
  int ranks = 1, rank = 0, c = 0, depth = 0;
  std::vector<int> first;  // ranks + 1: rank q owns C-level nodes [first[q], first[q + 1])

  // The C-level: enough nodes for every rank, twice as many when the ranks are not a power of two (the
  // largest share then holds at most 1.5 times the smallest's nodes, not 2), never below the leaves
  // (with fewer leaves than that, shares differ by one leaf, and some may be empty).
  partition(int ranks_, int rank_, int depth_) : ranks(ranks_), rank(rank_), depth(depth_) {
    const int need = std::bit_width(unsigned(ranks - 1));  // ceil(log2 ranks)
    c = std::min(depth, need + (std::has_single_bit(unsigned(ranks)) ? 0 : 1));
    first.resize(std::size_t(ranks) + 1);
    for (int q = 0; q <= ranks; ++q) first[q] = int((std::int64_t(q) << c) / ranks);
  }
  partition() = default;

  int begin(int l, int q) const { return first[q] << (l - c); }  // l >= c
  int end(int l, int q) const { return first[q + 1] << (l - c); }
  int begin(int l) const { return begin(l, rank); }
  int end(int l) const { return end(l, rank); }
  int count(int l) const { return end(l) - begin(l); }
  bool owns(int l, int t) const { return t >= begin(l) && t < end(l); }
  int owner(int l, int t) const {  // l >= c
    return int(std::upper_bound(first.begin(), first.end(), t >> (l - c)) - first.begin()) - 1;
  }
  int slots() const { return depth - c + 2; }  // levels c..L, then the dense leaves
  int slot_level(int s) const { return s == slots() - 1 ? depth : c + s; }

  // Level l's blocks in this rank's rows, split (l >= c; the dense leaves with l = depth).
  split_level split(const block_sparse_level& lv, int l) const {
    split_level sp;
    const int b0 = begin(l), n = count(l);
    std::vector<std::pair<int, int>> diag, off;
    for (int t = b0; t < b0 + n; ++t)
      for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b)
        if (!owns(l, lv.col[b])) sp.ghosts.push_back(lv.col[b]);
    std::sort(sp.ghosts.begin(), sp.ghosts.end());
    sp.ghosts.erase(std::unique(sp.ghosts.begin(), sp.ghosts.end()), sp.ghosts.end());
    // Columns are sorted within a row, and both local numberings keep their order: the blocks come in
    // the order make_block_sparse_level gives them.
    for (int t = b0; t < b0 + n; ++t)
      for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) {
        const int s = lv.col[b];
        if (owns(l, s)) {
          diag.emplace_back(t - b0, s - b0), sp.diag_global.push_back(b);
        } else {
          const int g = int(std::lower_bound(sp.ghosts.begin(), sp.ghosts.end(), s) - sp.ghosts.begin());
          off.emplace_back(t - b0, g), sp.off_global.push_back(b);
        }
      }
    sp.diag = make_block_sparse_level(n, std::move(diag));
    sp.off = make_block_sparse_level(std::max(n, int(sp.ghosts.size())), std::move(off));
    return sp;
  }

  // Every other rank's plan with this one, per slot. levels[s]: the blocks of slot s (whole level).
  std::vector<peer_plan> plans(const std::vector<const block_sparse_level*>& levels,
                               const std::vector<split_level>& splits) const {
    std::vector<peer_plan> peers(static_cast<std::size_t>(ranks));
    for (int q = 0; q < ranks; ++q) {
      peers[q].rank = q;
      peers[q].send.resize(std::size_t(slots()));
      peers[q].receive.assign(std::size_t(slots()), {0, 0});
    }
    for (int s = 0; s < slots(); ++s) {
      const int l = slot_level(s);
      const block_sparse_level& lv = *levels[s];
      // Sends: this rank's nodes in other ranks' rows (each rank's rows in order, so each list comes
      // out sorted once duplicates are gone).
      for (int q = 0; q < ranks; ++q) {
        if (q == rank) continue;
        auto& list = peers[q].send[s];
        for (int t = begin(l, q); t < end(l, q); ++t)
          for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b)
            if (owns(l, lv.col[b])) list.push_back(lv.col[b] - begin(l));
        std::sort(list.begin(), list.end());
        list.erase(std::unique(list.begin(), list.end()), list.end());
      }
      // Receives: the ghosts, grouped by owner.
      const auto& g = splits[s].ghosts;
      for (std::size_t i = 0; i < g.size();) {
        const int q = owner(l, g[i]);
        std::size_t j = i;
        while (j < g.size() && owner(l, g[j]) == q) ++j;
        peers[q].receive[s] = {int(i), int(j)};
        i = j;
      }
    }
    std::vector<peer_plan> used;
    for (auto& p : peers)
      if (p.rank != rank && !p.empty()) used.push_back(std::move(p));
    return used;
  }
};

}  // namespace h2expr::detail
