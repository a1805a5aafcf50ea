#pragma once
// HGEMV: Y = op(A) X for a block of vectors, written once for every space (section 4 of the H2 GPU
// paper). Each phase is one batched call per level, on layouts that need no per-call marshaling:
//   gather X into padded tree order -> upsweep (leaves, then transfers level by level) ->
//   coupling (block-sparse rows per level) -> downsweep -> leaves -> dense leaves -> scatter to Y.
// op(A) = A^T swaps the bases and reads the blocks by columns, transposed.
#include <h2expr/detail/batched.hpp>
#include <h2expr/detail/h2_data.hpp>
#include <h2expr/view.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

// Seconds per phase, for benchmarks (the paper's Figure 7). Timing synchronizes between phases.
struct hgemv_phases {
  double gather = 0, upsweep = 0, coupling = 0, downsweep = 0, leaves = 0, dense = 0, scatter = 0;
  double total() const { return gather + upsweep + coupling + downsweep + leaves + dense + scatter; }
};

// Y = alpha op(A) X + beta Y (beta == 0 does not read Y): expressions sum products into one buffer.
template <class T, class Space>
void hgemv(const h2_data<T, Space>& A, op trans, T alpha, const_view<T, Space> X, T beta, view<T, Space> Y,
           hgemv_phases* phases = nullptr) {
  auto& ctx = *A.ctx;
  auto last = std::chrono::steady_clock::now();
  auto mark = [&](double hgemv_phases::*slot) {
    if (!phases) return;
    ctx.synchronize();
    const auto now = std::chrono::steady_clock::now();
    phases->*slot += std::chrono::duration<double>(now - last).count();
    last = now;
  };
  const int L = A.depth(), m = A.m_max, nv = int(X.cols());
  const int leaves = 1 << L;
  const std::int64_t np = std::int64_t(leaves) * m;
  const basis_tree<T, Space>& in = trans == op::none ? *A.col_basis : *A.row_basis;
  const basis_tree<T, Space>& out = trans == op::none ? *A.row_basis : *A.col_basis;
  const auto& arrays = *A.arrays;
  if (nv == 0) return;

  buffer<T, Space> Xp(A.ctx, std::size_t(np) * nv), Yp(A.ctx, std::size_t(np) * nv);
  gather_rows(ctx, arrays.padded_to_user.data(), np, X.data(), X.ld(), Xp.data(), np, nv);
  mark(&hgemv_phases::gather);

  // x_hat[l], y_hat[l]: the rank[l] coefficients of every node of level l, stacked: (nodes * rank) x nv.
  // One allocation for all of them: a product is a few dozen launches, and allocations would add as many.
  std::vector<std::size_t> offset(L + 2, 0);
  for (int l = 0; l <= L; ++l) offset[l + 1] = offset[l] + (std::size_t(1) << l) * A.rank[l] * nv;
  buffer<T, Space> coefficients(A.ctx, 2 * offset[L + 1]);
  std::vector<T*> xh(L + 1), yh(L + 1);
  for (int l = 0; l <= L; ++l) {
    xh[l] = coefficients.data() + offset[l];
    yh[l] = coefficients.data() + offset[L + 1] + offset[l];
  }
  auto ld = [&](int l) { return std::int64_t(1 << l) * A.rank[l]; };
  // Levels above the coarsest one with coupling blocks carry nothing: the sweeps stop there.
  int top = L;
  for (int l = 0; l <= L; ++l)
    if (arrays.coupling_blocks[l] > 0) {
      top = l;
      break;
    }

  // Upsweep: x_hat = V_leaf^T X at the leaves, then x_hat(parent) = [E_c1; E_c2]^T x_hat(children).
  if (A.rank[L] > 0)
    gemm_strided_batched(ctx, op::transpose, op::none, A.rank[L], nv, m, T(1), in.leaves.data(), m,
                         std::int64_t(m) * A.rank[L], Xp.data(), int(np), m, T(0), xh[L], int(ld(L)),
                         A.rank[L], leaves);
  for (int l = L; l > top; --l) {
    const int kc = A.rank[l], kp = A.rank[l - 1], parents = 1 << (l - 1);
    if (kp == 0) continue;
    if (kc == 0) {
      fill(ctx, xh[l - 1], offset[l] - offset[l - 1], T(0));
      continue;
    }
    gemm_strided_batched(ctx, op::transpose, op::none, kp, nv, 2 * kc, T(1), in.transfers[l].data(), 2 * kc,
                         std::int64_t(2) * kc * kp, xh[l], int(ld(l)), 2 * kc, T(0), xh[l - 1],
                         int(ld(l - 1)), kp, parents);
  }
  mark(&hgemv_phases::upsweep);

  // Coupling: y_hat(t) = sum_s S_ts x_hat(s) per level (or S_st^T x_hat(s) for A^T).
  for (int l = top; l <= L; ++l) {
    const int k = A.rank[l];
    if (k == 0) continue;
    const auto& lv = arrays.coupling[l];
    if (trans == op::none)
      bsr_gemm(ctx, op::none, 1 << l, lv.row_ptr.data(), lv.col.data(), static_cast<const int*>(nullptr),
               A.coupling[l].data(), k, k, std::int64_t(k) * k, xh[l], ld(l), yh[l], ld(l), nv, T(0));
    else
      bsr_gemm(ctx, op::transpose, 1 << l, lv.col_ptr.data(), lv.row_of.data(), lv.block_of.data(),
               A.coupling[l].data(), k, k, std::int64_t(k) * k, xh[l], ld(l), yh[l], ld(l), nv, T(0));
  }

  mark(&hgemv_phases::coupling);

  // Downsweep: y_hat(children) += [E_c1; E_c2] y_hat(parent).
  for (int l = top + 1; l <= L; ++l) {
    const int kc = A.rank[l], kp = A.rank[l - 1], parents = 1 << (l - 1);
    if (kc == 0 || kp == 0) continue;
    gemm_strided_batched(ctx, op::none, op::none, 2 * kc, nv, kp, T(1), out.transfers[l].data(), 2 * kc,
                         std::int64_t(2) * kc * kp, yh[l - 1], int(ld(l - 1)), kp, T(1), yh[l],
                         int(ld(l)), 2 * kc, parents);
  }

  mark(&hgemv_phases::downsweep);

  // Leaves: Y = U_leaf y_hat, then the dense leaves add their part.
  if (A.rank[L] > 0)
    gemm_strided_batched(ctx, op::none, op::none, m, nv, A.rank[L], T(1), out.leaves.data(), m,
                         std::int64_t(m) * A.rank[L], yh[L], int(ld(L)), A.rank[L], T(0), Yp.data(), int(np),
                         m, leaves);
  mark(&hgemv_phases::leaves);
  const T leaves_written = A.rank[L] > 0 ? T(1) : T(0);
  const auto& dn = arrays.dense;
  if (trans == op::none)
    bsr_gemm(ctx, op::none, leaves, dn.row_ptr.data(), dn.col.data(), static_cast<const int*>(nullptr), A.dense.data(),
             m, m, std::int64_t(m) * m, Xp.data(), np, Yp.data(), np, nv, leaves_written);
  else
    bsr_gemm(ctx, op::transpose, leaves, dn.col_ptr.data(), dn.row_of.data(), dn.block_of.data(), A.dense.data(), m, m,
             std::int64_t(m) * m, Xp.data(), np, Yp.data(), np, nv, leaves_written);

  mark(&hgemv_phases::dense);

  scatter_rows(ctx, arrays.padded_to_user.data(), np, Yp.data(), np, Y.data(), Y.ld(), nv, alpha, beta);
  mark(&hgemv_phases::scatter);
}

// Y = op(A) X.
template <class T, class Space>
void hgemv(const h2_data<T, Space>& A, op trans, const_view<T, Space> X, view<T, Space> Y,
           hgemv_phases* phases = nullptr) {
  hgemv(A, trans, T(1), X, T(0), Y, phases);
}

}  // namespace h2expr::detail
