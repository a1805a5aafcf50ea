#pragma once
// Distributed orthogonalization (section 5 of the distributed H2 paper, its first half): the bases
// made orthonormal without changing the operator, each rank on its share, as the single-process
// orthogonalize (h2/orthogonalize.hpp) does on the whole tree:
//   QR of the own leaves, then of [R_c1 E_c1; R_c2 E_c2] up the own subtrees -> allgather of the
//   C-level R factors; the top's on every rank -> the R factors of the ghosts (one message per
//   neighbour, the product's plans) -> S_ts := R_t S_ts R_s^T for the own block rows and the top.
// The same inputs meet the same code, so every node's new basis is the single process's.
#include <h2expr/detail/distributed/data.hpp>
#include <h2expr/detail/h2/orthogonalize.hpp>
#include <h2expr/detail/primitives/batched.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

// R_t S_b R_s^T for blocks b (k x k, in order) with t = rows[b] into Rr, s = cols[b] into Rc (k x k per
// node, only their first r rows nonzero): r x r blocks, in order.
template <class T, class Space>
buffer<T, Space> project_blocks(const context_ptr<Space>& ctx, const T* S, const T* Rr, const T* Rc,
                                const std::vector<int>& rows, const std::vector<int>& cols, int k, int r) {
  const int count = int(rows.size());
  buffer<T, Space> out(ctx, std::size_t(count) * r * r);
  if (count == 0 || r == 0) return out;
  batch<const T, Space> x(ctx), y(ctx), s(ctx);
  batch<T, Space> o(ctx);
  for (int b = 0; b < count; ++b) {
    x.add(Rr + std::int64_t(rows[b]) * k * k, r, k, k), y.add(Rc + std::int64_t(cols[b]) * k * k, r, k, k);
    s.add(S + std::int64_t(b) * k * k, k, k, k), o.add(out.data() + std::int64_t(b) * r * r, r, r, r);
  }
  buffer<T, Space> tmp(ctx, std::size_t(count) * r * k);
  const batch<T, Space> t(ctx, tmp.data(), std::int64_t(r) * k, count, r, k, r);
  gemm(op::none, op::none, T(1), x, s, T(0), t);
  gemm(op::none, op::transpose, T(1), t, y, T(0), o);
  return out;
}

// Returns this rank's traffic: bytes and messages sent, its share of the allgather.
struct distributed_traffic {
  std::int64_t bytes_sent = 0, messages_sent = 0, allgather_bytes = 0;
};

template <class T, class Space>
distributed_traffic distributed_orthogonalize(distributed_data<T, Space>& A) {
  distributed_traffic traffic;
  require<missing_structure>(A.comm != nullptr, "distributed orthogonalize: the matrix is empty (default-constructed)");
  const communicator& comm = *A.comm;
  const partition& D = A.dist;
  const auto& ctx = A.ctx;
  const int L = A.depth(), c = D.c, m = A.m_max, S = D.slots();
  const auto& tree = A.structure.row_tree();
  const auto& blocks = A.structure.blocks();
  const std::vector<int> k = A.rank, r = orthogonal_ranks(A.rank, m);
  const auto have = basis_columns(tree, k, r);  // the whole tree's, as one process's upsweep sees them
  comm.agree("distributed orthogonalize", {{"the depth", L}, {"the leaf rank", k[L]}, {"the root rank", k[0]}}, {});
  // Two bases (U, V) each on its own; the blocks' columns take V's factors, whose ghosts' travel.
  const bool two = A.row_basis != A.col_basis;
  const int sides = two ? 2 : 1, cb = sides - 1;
  const basis_share<T, Space>* B[2] = {A.row_basis.get(), A.col_basis.get()};

  // The new bases and blocks are built beside the old ones and replace them only once every rank has
  // them: a failure anywhere leaves the matrix as it was, on every rank.
  buffer<T, Space> leaves[2];
  std::vector<buffer<T, Space>> transfers[2], top_coupling(c), new_blocks(S - 1);
  // R[b][l], l >= c: the own nodes' R factors (k_l x k_l each), then (the columns' side) the ghosts'.
  std::vector<buffer<T, Space>> R[2], Rtop[2];
  for (int b = 0; b < 2; ++b) transfers[b].resize(L + 1), R[b].resize(L + 1), Rtop[b].resize(c + 1);
  factor_exchange<T, Space> exchange;
  const rank_failure local = rank_failure::of([&] {
    for (int b = 0; b < sides; ++b) {
      for (int l = c; l <= L; ++l) {
        R[b][l] = buffer<T, Space>(ctx, std::size_t(D.count(l) + A.splits[l - c].ghosts) * k[l] * k[l]);
        require(R[b][l].size() <= std::size_t(INT32_MAX), "distributed orthogonalize: a rank's R factors of one level pass 2^31 - 1 values");
      }
      leaves[b] = clone(B[b]->leaves);
      orthogonalize_leaves<T, Space>(ctx, leaves[b], tree, D.begin(L), D.count(L), m, k[L], r[L], R[b][L].data());
      for (int l = L; l > c; --l)  // the own parents' children: from node 2 D.begin(l - 1) of level l
        transfers[b][l] = orthogonalize_level<T, Space>(ctx, R[b][l].data(), B[b]->transfers[l].data(), D.count(l - 1), k[l],
                                                        k[l - 1], r[l], r[l - 1], R[b][l - 1].data(),
                                                        have[l].data() + 2 * D.begin(l - 1));
    }
    // The own R factors the neighbours' blocks need (the columns' side's), and the C-level's.
    exchange.pack(A, R, sides, k[c], "distributed orthogonalize");
  });
  comm.agree("distributed orthogonalize", {}, local);
  exchange.post(A, traffic);

  const rank_failure tail = rank_failure::of([&] {
    // The top, on every rank: all C-level R factors, then the same recursion on the replicated transfers.
    if (c > 0)
      for (int b = 0; b < sides; ++b) {
        Rtop[b][c] = exchange.top.gathered(A, b);
        for (int l = c; l >= 1; --l) {
          Rtop[b][l - 1] = buffer<T, Space>(ctx, (std::size_t(1) << (l - 1)) * k[l - 1] * k[l - 1]);
          transfers[b][l] = orthogonalize_level<T, Space>(ctx, Rtop[b][l].data(), B[b]->transfers[l].data(), 1 << (l - 1),
                                                          k[l], k[l - 1], r[l], r[l - 1], Rtop[b][l - 1].data(),
                                                          have[l].data());
        }
      }
    std::vector<T*> into;
    for (int s = 0; s + 1 < S; ++s) into.push_back(R[cb][c + s].data());
    exchange.ghosts.finish(A, into);
    // S_ts := R_t S_ts R_s^T (R_s: V's when two): the top's blocks, then the own block rows (columns:
    // own, then ghosts).
    for (int l = 0; l < c; ++l) {
      const auto& lv = blocks.coupling[l];
      std::vector<int> rows(lv.blocks());
      for (int t = 0; t < lv.level_size(); ++t) std::fill(rows.begin() + lv.row_ptr[t], rows.begin() + lv.row_ptr[t + 1], t);
      top_coupling[l] = project_blocks(ctx, A.top_coupling[l].data(), Rtop[0][l].data(), Rtop[cb][l].data(), rows, lv.col, k[l], r[l]);
    }
    for (int s = 0; s + 1 < S; ++s) {
      const int l = c + s;
      const auto [rows, cols] = slot_blocks(A, s);
      new_blocks[s] = project_blocks(ctx, A.blocks[s].data(), R[0][l].data(), R[cb][l].data(), rows, cols, k[l], r[l]);
    }
  });
  comm.agree("distributed orthogonalize", {}, tail);

  for (int b = 0; b < sides; ++b) {
    basis_share<T, Space>& basis = b == 0 ? *A.row_basis : *A.col_basis;
    basis.leaves = std::move(leaves[b]);
    for (int l = 1; l <= L; ++l) basis.transfers[l] = std::move(transfers[b][l]);
    basis.orthonormal = true;
  }
  A.top_coupling = std::move(top_coupling);
  for (int s = 0; s + 1 < S; ++s) A.blocks[s] = std::move(new_blocks[s]), A.unit[s] = r[c + s];
  A.rank = r;
  build_peer_rows(A);
  return traffic;
}

}  // namespace h2expr::detail
