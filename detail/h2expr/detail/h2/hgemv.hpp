#pragma once
// HGEMV: Y = op(A) X for a block of vectors, written once for every space (section 4 of the H2 GPU
// paper). Each phase is one batched call per level, on layouts that need no per-call marshaling:
//   gather X into padded tree order -> upsweep (leaves, then transfers level by level) ->
//   coupling (block-sparse rows per level) -> downsweep -> leaves -> dense leaves -> scatter to Y.
// op(A) = A^T swaps the bases and reads the blocks by columns, transposed. Per-node ranks (compact
// bases) run the same phases: the bases' batch views (basis_layout, batch.hpp) then have items of
// different sizes, and the block-sparse products are told every node's size (bsr_shape.hpp).
// A product's temporaries (the coefficients, the reordered blocks, the batch arrays of per-node ranks)
// come from its context's workspace (workspace.hpp): once that has grown, a product allocates nothing
// (on the host, a large workspace comes from the cache of large blocks, already touched).
#include <h2expr/detail/primitives/batch.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/core/view.hpp>
#include <h2expr/detail/core/workspace.hpp>

#include <chrono>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace h2expr::detail {

// Seconds per phase, for benchmarks (the paper's Figure 7). Timing synchronizes between phases.
struct hgemv_phases {
  double gather = 0, upsweep = 0, coupling = 0, downsweep = 0, leaves = 0, dense = 0, scatter = 0;
  double total() const { return gather + upsweep + coupling + downsweep + leaves + dense + scatter; }
};

// Times per phase: the clock between marks (synchronizing, so that a phase's launches are counted).
template <class Space>
struct phase_clock {
  context<Space>& ctx;
  hgemv_phases* phases;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  void mark(double hgemv_phases::*slot) {
    if (!phases) return;
    phases->*slot += seconds_since(ctx, last);
    last = std::chrono::steady_clock::now();
  }
};

// The temporaries of one product of nv vectors, as parts of a workspace plan: the coefficients of
// every node of every level, x_hat[l] and y_hat[l] stacked (total(l) x nv each, node t at rows at(l, t)),
// and room in the space for the arrays of the products over per-node ranks: the block-sparse products'
// sizes and offsets (output nodes from the out basis, input nodes from the in basis, blocks packed in
// row order) and the sweeps' variable-size batches (three per product of a level whose ranks differ
// from node to node), all in one upload.
template <class T, class Space>
struct hgemv_temporaries {
  basis_layout in, out;
  int top = 0;  // levels above the coarsest one with coupling blocks carry nothing: the sweeps stop there
  std::vector<std::size_t> x_at, y_at;
  std::vector<std::int64_t> shapes;
  std::vector<std::size_t> shape_at;
  workspace_part<T> coefficients;
  std::size_t batch_array_bytes = 0;
  workspace_part<std::byte> batch_arrays;

  hgemv_temporaries(const h2_data<T, Space>& A, op trans, int nv, workspace_plan& plan)
      : in((trans == op::none ? *A.col_basis : *A.row_basis).layout(A.rank)),
        out((trans == op::none ? *A.row_basis : *A.col_basis).layout(A.rank)) {
    const int L = A.depth();
    x_at.assign(L + 2, 0), y_at.assign(L + 2, 0);
    for (int l = 0; l <= L; ++l) {
      x_at[l + 1] = x_at[l] + std::size_t(in.total(l)) * nv;
      y_at[l + 1] = y_at[l] + std::size_t(out.total(l)) * nv;
    }
    top = L;
    for (int l = 0; l <= L; ++l)
      if (A.arrays->coupling_blocks[l] > 0) {
        top = l;
        break;
      }
    const basis_layout& lr = trans == op::none ? out : in;
    const basis_layout& lc = trans == op::none ? in : out;
    shape_at.assign(L + 1, 0);
    for (int l = top; l <= L; ++l) {
      if (!per_node(A, l)) continue;
      shape_at[l] = shapes.size();
      for (const basis_layout* b : {&out, &in}) {
        for (int t = 0; t < 1 << l; ++t) shapes.push_back(b->k(l, t));
        shapes.insert(shapes.end(), b->start[l].begin(), b->start[l].end() - 1);
      }
      const auto co = A.coupling_offsets(l, lr, lc);
      shapes.insert(shapes.end(), co.begin(), co.end());
    }
    // The sweeps' products: at the leaves (2^L items) and per level l > top (2^(l-1) parents).
    batch_array_bytes = batch_array_room<Space>::template staged_bytes<std::int64_t>(shapes.size());
    for (const basis_layout* b : {&in, &out}) {
      if (sweep_varies(*b, L, false)) batch_array_bytes += 3 * batch<const T, Space>::array_bytes_of(std::size_t(1) << L);
      for (int l = L; l > top; --l)
        if (sweep_varies(*b, l, true)) batch_array_bytes += 3 * batch<const T, Space>::array_bytes_of(std::size_t(1) << (l - 1));
    }
    coefficients = plan.add<T>(x_at[L + 1] + y_at[L + 1]);
    batch_arrays = plan.add<std::byte>(batch_array_bytes);
  }
  // Whether a sweep's product over basis layout b at level l (transfers: between l and l - 1; else the
  // leaves) has per-node ranks: its three batches then need arrays in the space (uniform ones are strided).
  static bool sweep_varies(const basis_layout& b, int l, bool transfers) {
    return b.uniform_rank(l) < 0 || (transfers && b.uniform_rank(l - 1) < 0);
  }
  // Whether level l's coupling products need every node's size (its nodes' ranks differ).
  bool per_node(const h2_data<T, Space>& A, int l) const {
    return A.rank[l] > 0 && (out.uniform_rank(l) != A.rank[l] || in.uniform_rank(l) != A.rank[l]);
  }
};

// Yp = op(A) Xp on blocks in A's padded tree order (np x nv; Xp's padding rows zero, Yp's come back
// zero): the phases between the gather and the scatter, on the temporaries tmp planned in ws.
template <class T, class Space>
void hgemv_tree(const h2_data<T, Space>& A, op trans, const T* Xp, std::int64_t ldx, T* Yp, std::int64_t ldy, int nv,
                const hgemv_temporaries<T, Space>& tmp, const workspace<Space>& ws, phase_clock<Space>& clock) {
  auto& ctx = *A.ctx;
  auto mark = [&](double hgemv_phases::*slot) { clock.mark(slot); };
  const int L = A.depth(), m = A.m_max;
  const int leaves = 1 << L;
  const basis_tree<T, Space>& in = trans == op::none ? *A.col_basis : *A.row_basis;
  const basis_tree<T, Space>& out = trans == op::none ? *A.row_basis : *A.col_basis;
  const basis_layout &li = tmp.in, &lo = tmp.out;
  const auto& arrays = *A.arrays;
  require(ldx <= INT_MAX && ldy <= INT_MAX, "H2 product: padded blocks past 2^31 - 1 rows");

  T* const coefficients = ws[tmp.coefficients];
  std::vector<T*> xh(L + 1), yh(L + 1);
  for (int l = 0; l <= L; ++l) {
    xh[l] = coefficients + tmp.x_at[l];
    yh[l] = coefficients + tmp.x_at[L + 1] + tmp.y_at[l];
  }
  const int top = tmp.top;
  // The sweeps' products C = op(A) B + beta C, one item per node (or parent) of a level from the bases'
  // batch views, made first: those over per-node ranks keep their arrays in the workspace's room and
  // go there in one upload with the coupling products' sizes (on the GPU each upload waits for the
  // stream); uniform ones are strided.
  struct sweep_product {
    op ta;
    batch<const T, Space> a, b;
    T beta;
    batch<T, Space> c;
    bool varies;
  };
  const auto& c = A.ctx;
  auto cin = [](const T* p) { return p; };
  std::vector<sweep_product> up, down, last;
  // Upsweep: x_hat = V_leaf^T X at the leaves, then x_hat(parent) = [E_c1; E_c2]^T x_hat(children).
  if (A.rank[L] > 0)
    up.push_back({op::transpose, li.leaf_batch(c, in.leaves.data(), m), batch<const T, Space>(c, Xp, m, leaves, m, nv, int(ldx)),
                  T(0), li.coefficient_batch(c, xh[L], L, nv), tmp.sweep_varies(li, L, false)});
  for (int l = L; l > top; --l)  // k = 0 (childless ranks) writes zeros
    if (A.rank[l - 1] > 0)
      up.push_back({op::transpose, li.transfer_batch(c, in.transfers[l].data(), l), li.stacked_coefficient_batch(c, cin(xh[l]), l, nv),
                    T(0), li.coefficient_batch(c, xh[l - 1], l - 1, nv), tmp.sweep_varies(li, l, true)});
  // Downsweep: y_hat(children) += [E_c1; E_c2] y_hat(parent).
  for (int l = top + 1; l <= L; ++l)
    if (A.rank[l] > 0 && A.rank[l - 1] > 0)
      down.push_back({op::none, lo.transfer_batch(c, out.transfers[l].data(), l), lo.coefficient_batch(c, cin(yh[l - 1]), l - 1, nv),
                      T(1), lo.stacked_coefficient_batch(c, yh[l], l, nv), tmp.sweep_varies(lo, l, true)});
  // Leaves: Y = U_leaf y_hat (a rank-0 leaf writes zeros).
  if (A.rank[L] > 0)
    last.push_back({op::none, lo.leaf_batch(c, out.leaves.data(), m), lo.coefficient_batch(c, cin(yh[L]), L, nv), T(0),
                    batch<T, Space>(c, Yp, m, leaves, m, nv, int(ldy)), tmp.sweep_varies(lo, L, false)});
  batch_array_room<Space> room(ws[tmp.batch_arrays], tmp.batch_array_bytes);
  const std::int64_t* const shapes = room.stage(tmp.shapes.data(), tmp.shapes.size());
  std::vector<const batch<const T, Space>*> inputs;
  std::vector<const batch<T, Space>*> outputs;
  for (auto* products : {&up, &down, &last})
    for (sweep_product& p : *products)
      if (p.varies) {
        p.a.keep_arrays_in(room), p.b.keep_arrays_in(room), p.c.keep_arrays_in(room);
        inputs.push_back(&p.a), inputs.push_back(&p.b), outputs.push_back(&p.c);
      }
  upload_together(c, inputs, outputs);
  room.send(ctx);  // the sizes, when no sweep's batch took them along
  auto run = [](const std::vector<sweep_product>& products) {
    for (const sweep_product& p : products) gemm(p.ta, op::none, T(1), p.a, p.b, p.beta, p.c);
  };
  run(up);
  mark(&hgemv_phases::upsweep);

  // Coupling: y_hat(t) = sum_s S_ts x_hat(s) per level (or S_st^T x_hat(s) for A^T), one block-sparse
  // product per level; levels of per-node ranks read their sizes and offsets from the room.
  for (int l = top; l <= L; ++l) {
    const int k = A.rank[l];
    if (k == 0) continue;
    const auto& lv = arrays.coupling[l];
    const std::int64_t ldx = li.total(l), ldy = lo.total(l);
    bsr_shape shape;
    if (tmp.per_node(A, l)) {
      const std::int64_t* p = shapes + tmp.shape_at[l];
      const std::int64_t nodes = std::int64_t(1) << l;
      shape = {p, p + nodes, p + 2 * nodes, p + 3 * nodes, p + 4 * nodes};
    }
    if (trans == op::none)
      bsr_gemm(ctx, op::none, 1 << l, lv.row_ptr.data(), lv.col.data(), static_cast<const int*>(nullptr),
               A.coupling[l].data(), k, k, std::int64_t(k) * k, xh[l], ldx, yh[l], ldy, nv, T(0), shape);
    else
      bsr_gemm(ctx, op::transpose, 1 << l, lv.col_ptr.data(), lv.row_of.data(), lv.block_of.data(),
               A.coupling[l].data(), k, k, std::int64_t(k) * k, xh[l], ldx, yh[l], ldy, nv, T(0), shape);
  }

  mark(&hgemv_phases::coupling);

  run(down);
  mark(&hgemv_phases::downsweep);

  // Leaves, then the dense leaves add their part.
  run(last);
  mark(&hgemv_phases::leaves);
  const T leaves_written = A.rank[L] > 0 ? T(1) : T(0);
  const auto& dn = arrays.dense;
  if (trans == op::none)
    bsr_gemm(ctx, op::none, leaves, dn.row_ptr.data(), dn.col.data(), static_cast<const int*>(nullptr), A.dense.data(),
             m, m, std::int64_t(m) * m, Xp, ldx, Yp, ldy, nv, leaves_written);
  else
    bsr_gemm(ctx, op::transpose, leaves, dn.col_ptr.data(), dn.row_of.data(), dn.block_of.data(), A.dense.data(), m, m,
             std::int64_t(m) * m, Xp, ldx, Yp, ldy, nv, leaves_written);

  mark(&hgemv_phases::dense);
}

// Y = alpha op(A) X + beta Y (beta == 0 does not read Y): expressions sum products into one buffer.
template <class T, class Space>
void hgemv(const h2_data<T, Space>& A, op trans, T alpha, const_view<T, Space> X, T beta, view<T, Space> Y,
           hgemv_phases* phases = nullptr) {
  require(X.cols() <= INT_MAX, "H2 product: more than 2^31 - 1 vectors");
  const int nv = int(X.cols());
  if (nv == 0) return;
  auto& ctx = *A.ctx;
  phase_clock<Space> clock{ctx, phases};
  const std::int64_t np = A.padded().np;
  const int* map = A.arrays->padded_to_user.data();
  workspace_plan plan;
  const hgemv_temporaries<T, Space> tmp(A, trans, nv, plan);
  const auto xp = plan.add<T>(std::size_t(np) * nv), yp = plan.add<T>(std::size_t(np) * nv);
  const workspace<Space> ws(ctx, plan);
  T *Xp = ws[xp], *Yp = ws[yp];
  gather_rows(ctx, map, np, X.data(), X.ld(), Xp, np, nv);
  clock.mark(&hgemv_phases::gather);
  hgemv_tree(A, trans, Xp, np, Yp, np, nv, tmp, ws, clock);
  scatter_rows(ctx, map, np, Yp, np, Y.data(), Y.ld(), nv, alpha, beta);
  clock.mark(&hgemv_phases::scatter);
}

// The same on blocks in A's padded tree order (np rows, zero padding rows; see padded_order).
template <class T, class Space>
void hgemv_padded(const h2_data<T, Space>& A, op trans, T alpha, const_view<T, Space> Xp, T beta, view<T, Space> Yp,
                  hgemv_phases* phases = nullptr) {
  const index np = A.padded().np;
  require<dimension_mismatch>(Xp.rows() == np && Yp.rows() == np && Xp.cols() == Yp.cols(),
                              "H2 product in tree order: blocks of " + std::to_string(Xp.rows()) + " -> " +
                                  std::to_string(Yp.rows()) + " rows, the padded order has " + std::to_string(np));
  require(Xp.cols() <= INT_MAX, "H2 product: more than 2^31 - 1 vectors");
  const int nv = int(Xp.cols());
  if (nv == 0) return;
  auto& ctx = *A.ctx;
  phase_clock<Space> clock{ctx, phases};
  const bool direct = alpha == T(1) && beta == T(0);  // else into a temporary Z, then added
  workspace_plan plan;
  const hgemv_temporaries<T, Space> tmp(A, trans, nv, plan);
  const auto z = plan.add<T>(direct ? 0 : std::size_t(np) * nv);
  const workspace<Space> ws(ctx, plan);
  if (direct) return hgemv_tree(A, trans, Xp.data(), Xp.ld(), Yp.data(), Yp.ld(), nv, tmp, ws, clock);
  hgemv_tree(A, trans, Xp.data(), Xp.ld(), ws[z], np, nv, tmp, ws, clock);
  axpby_2d(ctx, std::size_t(np), std::size_t(nv), alpha, ws[z], std::size_t(np), beta, Yp.data(), std::size_t(Yp.ld()));
}

// Y = op(A) X.
template <class T, class Space>
void hgemv(const h2_data<T, Space>& A, op trans, const_view<T, Space> X, view<T, Space> Y,
           hgemv_phases* phases = nullptr) {
  hgemv(A, trans, T(1), X, T(0), Y, phases);
}

}  // namespace h2expr::detail
