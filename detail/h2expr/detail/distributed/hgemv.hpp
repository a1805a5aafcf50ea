#pragma once
// Distributed HGEMV (sections 3-4 of the distributed H2 paper): Y = alpha op(A) X + beta Y, X and Y
// this rank's rows. Every rank runs the single-process phases (hgemv.hpp) on its share:
//   upsweep of its subtrees -> one message per neighbour with the coefficients (and leaf rows of X)
//   its block rows need from it -> allgather of the C-level coefficients; the top, on every rank ->
//   products with the blocks whose columns are its own, while the messages travel -> the blocks
//   with the received columns -> downsweep of its subtrees, leaves, dense leaves.
// op(A) = A^T runs the same share by columns: the blocks of its rows send their products to the
// owners of their columns (the same plans, reversed), which add them, so A^T needs no second copy.
#include <h2expr/detail/core/view.hpp>
#include <h2expr/detail/core/workspace.hpp>
#include <h2expr/detail/distributed/data.hpp>
#include <h2expr/detail/primitives/batched.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

namespace h2expr::detail {

// What one product cost this rank: its point-to-point traffic, its share of the allgather, time.
struct distributed_product_report {
  std::int64_t bytes_sent = 0, messages_sent = 0, bytes_received = 0, messages_received = 0;
  std::int64_t allgather_bytes = 0;  // this rank's C-level coefficients, which the allgather gives every rank
  double seconds = 0;                // the whole call
  double seconds_waiting = 0;        // in MPI_Waitall, after the local work that overlaps the messages
};

template <class T, class Space>
void distributed_hgemv(const distributed_data<T, Space>& A, op trans, T alpha, const_view<T, Space> X, T beta,
                       view<T, Space> Y, distributed_product_report* report = nullptr, const rank_failure& prior = {}) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  require<missing_structure>(A.comm != nullptr, "distributed H2 product: the matrix is empty (default-constructed)");
  const communicator& comm = *A.comm;
  const partition& D = A.dist;
  auto& ctx = *A.ctx;
  const auto& cp = A.ctx;
  const index rows = index(A.local_indices.size());
  rank_failure bad = prior;  // the caller's allocation of Y, when it failed
  if (!bad && (X.rows() != rows || Y.rows() != rows || X.cols() != Y.cols()))
    bad = {rank_failure::dimensions, "H2 product: this rank holds " + std::to_string(rows) + " rows, X is " +
                                         std::to_string(X.rows()) + " x " + std::to_string(X.cols()) + ", Y " +
                                         std::to_string(Y.rows()) + " x " + std::to_string(Y.cols())};
  if (!bad && X.cols() > INT_MAX) bad = {rank_failure::invalid, "H2 product: more than 2^31 - 1 vectors"};
  comm.agree("distributed H2 product", {{"the number of vectors", std::int64_t(X.cols())}, {"the operation (A or A^T)", int(trans)}},
             bad);
  const int nv = int(X.cols());
  if (nv == 0) return;

  const bool forward = trans == op::none;
  const int L = A.depth(), c = D.c, m = A.m_max, S = D.slots(), sd = S - 1;
  const basis_share<T, Space>& in = forward ? *A.col_basis : *A.row_basis;
  const basis_share<T, Space>& out = forward ? *A.row_basis : *A.col_basis;
  auto own_rows = [&](int s) { return std::int64_t(D.count(D.slot_level(s))) * A.unit[s]; };
  auto ghost_rows = [&](int s) { return std::int64_t(A.splits[s].ghosts) * A.unit[s]; };
  auto ld = [](std::int64_t rows) { return int(std::max<std::int64_t>(rows, 1)); };
  // Per slot: x (inputs) and y (outputs) of the own nodes, and of the ghosts: inputs for A, partial
  // outputs for A^T. The dense slot's own x and y are X and Y in padded tree order. With the top's
  // levels (below), all from the context's workspace (workspace.hpp).
  const int kc = A.rank[c];
  const bool top = A.top_level < c;
  auto level_rows = [&](int l) { return (std::int64_t(1) << l) * A.rank[l]; };
  workspace_plan plan;
  std::vector<workspace_part<T>> xo_at(S), yo_at(S), g_at(S), xf_at(c + 1), yf_at(c + 1);
  for (int s = 0; s < S; ++s) {
    xo_at[s] = plan.add<T>(std::size_t(own_rows(s)) * nv);
    yo_at[s] = plan.add<T>(std::size_t(own_rows(s)) * nv);
    g_at[s] = plan.add<T>(std::size_t(ghost_rows(s)) * nv);
  }
  if (top)  // x of the levels top_level .. c, y of the levels top_level .. c
    for (int l = A.top_level; l <= c; ++l)
      xf_at[l] = plan.add<T>(std::size_t(level_rows(l)) * nv), yf_at[l] = plan.add<T>(std::size_t(level_rows(l)) * nv);
  // Messages, one per neighbour each way: the own rows a neighbour's blocks read (A), or the partial
  // outputs of the ghosts (A^T), every slot's one after the other; and the allgather of the C-level
  // coefficients, when the top has blocks. Their values are parts of the workspace too.
  const std::size_t P = A.peers.size();
  auto rows_sent = [&](std::size_t i, int s) { return A.peer_row_at[i][s + 1] - A.peer_row_at[i][s]; };
  auto rows_ghost = [&](std::size_t i, int s) {
    return std::int64_t(A.peers[i].receive[s].second - A.peers[i].receive[s].first) * A.unit[s];
  };
  std::vector<std::size_t> send_size(P), receive_size(P);
  std::vector<workspace_part<T>> send_at(P), receive_at(P);
  for (std::size_t i = 0; i < P; ++i) {
    std::int64_t n_sent = 0, n_ghost = 0;
    for (int s = 0; s < S; ++s) n_sent += rows_sent(i, s), n_ghost += rows_ghost(i, s);
    send_size[i] = std::size_t(forward ? n_sent : n_ghost) * nv, receive_size[i] = std::size_t(forward ? n_ghost : n_sent) * nv;
    send_at[i] = plan.add<T>(send_size[i]), receive_at[i] = plan.add<T>(receive_size[i]);
  }
  const std::size_t mine_size = top ? std::size_t(std::int64_t(D.first[D.rank + 1]) - D.first[D.rank]) * kc * nv : 0,
                    all_size = top ? std::size_t(level_rows(c)) * nv : 0;
  const auto mine_at = plan.add<T>(mine_size), all_at = plan.add<T>(all_size);
  std::optional<workspace<Space>> ws;  // taken in the first checked phase: a rank that cannot fails there
  std::vector<T*> xo(S), yo(S), g(S), xf(c + 1), yf(c + 1);
  auto block_at = [&](int s, bool off) {  // the first block of a split
    const std::int64_t u = A.unit[s];
    return A.blocks[s].data() + (off ? A.splits[s].diag_blocks * u * u : 0);
  };
  auto split_product = [&](int s, bool off, T b) {
    const int l = D.slot_level(s), u = A.unit[s];
    if (u == 0) return;
    const auto& arr = off ? A.splits[s].off : A.splits[s].diag;
    const std::int64_t lo = ld(own_rows(s)), lg = ld(ghost_rows(s));
    if (forward)
      bsr_gemm(ctx, op::none, D.count(l), arr.row_ptr.data(), arr.col.data(), static_cast<const int*>(nullptr),
               block_at(s, off), u, u, std::int64_t(u) * u, off ? g[s] : xo[s], off ? lg : lo,
               yo[s], lo, nv, b);
    else
      bsr_gemm(ctx, op::transpose, off ? A.splits[s].ghosts : D.count(l), arr.col_ptr.data(), arr.row_of.data(),
               arr.block_of.data(), block_at(s, off), u, u, std::int64_t(u) * u, xo[s], lo,
               off ? g[s] : yo[s], off ? lg : lo, nv, b);
  };

  std::vector<message<T, Space>> sends, receives;
  sends.reserve(P), receives.reserve(P);
  pending messages;
  // The allgather's messages are made before the check below, so that no rank fails between it and the
  // collective.
  std::vector<int> counts(static_cast<std::size_t>(D.ranks));
  message<T, Space> mine(cp, 0), all(cp, 0);

  rank_failure local = rank_failure::of([&] {
    ws.emplace(ctx, plan);
    for (int s = 0; s < S; ++s) xo[s] = (*ws)[xo_at[s]], yo[s] = (*ws)[yo_at[s]], g[s] = (*ws)[g_at[s]];
    for (int l = 0; l <= c; ++l) xf[l] = (*ws)[xf_at[l]], yf[l] = (*ws)[yf_at[l]];
    gather_rows(ctx, A.padded_to_local.data(), own_rows(sd), X.data(), X.ld(), xo[sd], ld(own_rows(sd)), nv);
    // Upsweep of the own subtrees.
    const int kL = A.rank[L];
    if (kL > 0 && D.count(L) > 0)
      gemm_strided_batched(ctx, op::transpose, op::none, kL, nv, m, T(1), in.leaves.data(), m, std::int64_t(m) * kL,
                           xo[sd], ld(own_rows(sd)), m, T(0), xo[L - c], ld(own_rows(L - c)), kL, D.count(L));
    for (int l = L; l > c; --l) {
      const int k = A.rank[l], kp = A.rank[l - 1], parents = D.count(l - 1);
      if (kp == 0 || parents == 0) continue;
      if (k == 0) {
        fill(ctx, xo[l - 1 - c], std::size_t(own_rows(l - 1 - c)) * nv, T(0));
        continue;
      }
      gemm_strided_batched(ctx, op::transpose, op::none, kp, nv, 2 * k, T(1), in.transfers[l].data(), 2 * k,
                           std::int64_t(2) * k * kp, xo[l - c], ld(own_rows(l - c)), 2 * k, T(0),
                           xo[l - 1 - c], ld(own_rows(l - 1 - c)), kp, parents);
    }
    if (!forward)
      for (int s = 0; s < S; ++s) split_product(s, true, T(0));
    for (std::size_t i = 0; i < P; ++i) {
      sends.emplace_back(cp, (*ws)[send_at[i]], send_size[i]);
      receives.emplace_back(cp, (*ws)[receive_at[i]], receive_size[i]);
      T* to = sends.back().data();
      for (int s = 0; s < S; ++s) {
        if (forward && rows_sent(i, s) > 0) {
          gather_rows(ctx, A.peer_rows[i].data() + A.peer_row_at[i][s], rows_sent(i, s), xo[s], ld(own_rows(s)),
                      to, rows_sent(i, s), nv);
          to += rows_sent(i, s) * nv;
        } else if (!forward && rows_ghost(i, s) > 0) {
          copy_2d(ctx, std::size_t(rows_ghost(i, s)), std::size_t(nv),
                  g[s] + std::int64_t(A.peers[i].receive[s].first) * A.unit[s], std::size_t(ld(ghost_rows(s))), to,
                  std::size_t(rows_ghost(i, s)));
          to += rows_ghost(i, s) * nv;
        }
      }
      sends.back().before_send();
      receives.back().before_receive();  // after before_send's wait: the stream has nothing left to wait for
    }
    if (top) {
      require(level_rows(c) * nv <= INT_MAX, "distributed H2 product: the C-level coefficients pass 2^31 - 1 values");
      for (int q = 0; q < D.ranks; ++q) counts[q] = int((std::int64_t(D.first[q + 1]) - D.first[q]) * kc * nv);
      mine = message<T, Space>(cp, (*ws)[mine_at], mine_size);
      all = message<T, Space>(cp, (*ws)[all_at], all_size);
      copy(ctx, xo[0], mine.data(), mine.size());  // the own C-level rows: one contiguous block
      mine.before_send();
      all.before_receive();
    }
  });
  comm.agree("distributed H2 product", {}, local);  // no rank posts a message another will not answer
  for (std::size_t i = 0; i < P; ++i) {
    if (receives[i].size()) messages.receive(comm, receives[i].mpi(), receives[i].size(), A.peers[i].rank);
    if (sends[i].size()) messages.send(comm, sends[i].mpi(), sends[i].size(), A.peers[i].rank);
  }

  if (top) comm.allgather(mine.mpi(), counts, all.mpi());

  // The rest is this rank's alone; what fails in it reaches the others at the check at the end.
  double waited = 0;
  const rank_failure tail = rank_failure::of([&] {
    // The top, on every rank, from the allgathered C-level coefficients.
    if (top) {
      all.after_receive();
      for (int q = 0, at = 0; q < D.ranks; at += counts[q], ++q) {
        const std::size_t rows = std::size_t(D.first[q + 1] - D.first[q]) * kc;
        copy_2d(ctx, rows, std::size_t(nv), all.data() + at, std::max<std::size_t>(rows, 1),
                xf[c] + std::int64_t(D.first[q]) * kc, std::size_t(ld(level_rows(c))));
      }
      for (int l = c; l > A.top_level; --l) {
        const int k = A.rank[l], kp = A.rank[l - 1];
        if (kp == 0) continue;
        if (k == 0) {
          fill(ctx, xf[l - 1], std::size_t(level_rows(l - 1)) * nv, T(0));
          continue;
        }
        gemm_strided_batched(ctx, op::transpose, op::none, kp, nv, 2 * k, T(1), in.transfers[l].data(), 2 * k,
                             std::int64_t(2) * k * kp, xf[l], ld(level_rows(l)), 2 * k, T(0), xf[l - 1],
                             ld(level_rows(l - 1)), kp, 1 << (l - 1));
      }
      for (int l = A.top_level; l < c; ++l) {
        const int k = A.rank[l];
        const auto& arr = A.top_arrays[l];
        if (k == 0) continue;
        if (forward)
          bsr_gemm(ctx, op::none, 1 << l, arr.row_ptr.data(), arr.col.data(), static_cast<const int*>(nullptr),
                   A.top_coupling[l].data(), k, k, std::int64_t(k) * k, xf[l], ld(level_rows(l)), yf[l],
                   ld(level_rows(l)), nv, T(0));
        else
          bsr_gemm(ctx, op::transpose, 1 << l, arr.col_ptr.data(), arr.row_of.data(), arr.block_of.data(),
                   A.top_coupling[l].data(), k, k, std::int64_t(k) * k, xf[l], ld(level_rows(l)), yf[l],
                   ld(level_rows(l)), nv, T(0));
      }
      fill(ctx, yf[c], std::size_t(level_rows(c)) * nv, T(0));
      for (int l = A.top_level + 1; l <= c; ++l) {
        const int k = A.rank[l], kp = A.rank[l - 1];
        if (k == 0 || kp == 0) continue;
        gemm_strided_batched(ctx, op::none, op::none, 2 * k, nv, kp, T(1), out.transfers[l].data(), 2 * k,
                             std::int64_t(2) * k * kp, yf[l - 1], ld(level_rows(l - 1)), kp, T(1), yf[l],
                             ld(level_rows(l)), 2 * k, 1 << (l - 1));
      }
      if (report) report->allgather_bytes += std::int64_t(mine.size() * sizeof(T));
    }

    // The blocks whose columns are this rank's own, while the messages travel.
    for (int s = 0; s < S; ++s) split_product(s, false, T(0));
    const auto wait_start = clock::now();
    messages.wait();
    waited = std::chrono::duration<double>(clock::now() - wait_start).count();
    for (std::size_t i = 0; i < P; ++i) {
      receives[i].after_receive();
      const T* from = receives[i].data();
      for (int s = 0; s < S; ++s) {
        if (forward && rows_ghost(i, s) > 0) {
          copy_2d(ctx, std::size_t(rows_ghost(i, s)), std::size_t(nv), from, std::size_t(rows_ghost(i, s)),
                  g[s] + std::int64_t(A.peers[i].receive[s].first) * A.unit[s], std::size_t(ld(ghost_rows(s))));
          from += rows_ghost(i, s) * nv;
        } else if (!forward && rows_sent(i, s) > 0) {  // the neighbour's partial outputs of own nodes, added
          scatter_rows(ctx, A.peer_rows[i].data() + A.peer_row_at[i][s], rows_sent(i, s), from, rows_sent(i, s),
                       yo[s], ld(own_rows(s)), nv, T(1), T(1));
          from += rows_sent(i, s) * nv;
        }
      }
    }
    if (forward)
      for (int s = 0; s < S; ++s) split_product(s, true, T(1));
    // The top's downsweep ends in yf[c], which holds every C-level node: this rank adds its own.
    if (top && level_rows(c) > 0 && D.count(c) > 0)
      axpby_2d(ctx, std::size_t(own_rows(0)), std::size_t(nv), T(1), yf[c] + std::int64_t(D.begin(c)) * kc,
               std::size_t(ld((std::int64_t(1) << c) * kc)), T(1), yo[0], std::size_t(ld(own_rows(0))));

    // Downsweep of the own subtrees, the leaves, back to the user's order.
    for (int l = c + 1; l <= L; ++l) {
      const int k = A.rank[l], kp = A.rank[l - 1], parents = D.count(l - 1);
      if (k == 0 || kp == 0 || parents == 0) continue;
      gemm_strided_batched(ctx, op::none, op::none, 2 * k, nv, kp, T(1), out.transfers[l].data(), 2 * k,
                           std::int64_t(2) * k * kp, yo[l - 1 - c], ld(own_rows(l - 1 - c)), kp, T(1),
                           yo[l - c], ld(own_rows(l - c)), 2 * k, parents);
    }
    const int kL = A.rank[L];
    if (kL > 0 && D.count(L) > 0)
      gemm_strided_batched(ctx, op::none, op::none, m, nv, kL, T(1), out.leaves.data(), m, std::int64_t(m) * kL,
                           yo[L - c], ld(own_rows(L - c)), kL, T(1), yo[sd], ld(own_rows(sd)), m, D.count(L));
    scatter_rows(ctx, A.padded_to_local.data(), own_rows(sd), yo[sd], ld(own_rows(sd)), Y.data(), Y.ld(), nv, alpha,
                 beta);
    if (report) ctx.synchronize();  // the host reads the time (the buffers go in stream order)
  });
  comm.agree("distributed H2 product", {}, tail);

  if (report) {
    for (std::size_t i = 0; i < P; ++i) {
      report->bytes_sent += std::int64_t(sends[i].size() * sizeof(T)), report->messages_sent += sends[i].size() > 0;
      report->bytes_received += std::int64_t(receives[i].size() * sizeof(T));
      report->messages_received += receives[i].size() > 0;
    }
    report->seconds += std::chrono::duration<double>(clock::now() - t0).count();
    report->seconds_waiting += waited;
  }
}

}  // namespace h2expr::detail
