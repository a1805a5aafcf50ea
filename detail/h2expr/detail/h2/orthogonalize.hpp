#pragma once
// Orthogonalization of H2 bases (section 5 of the H2 GPU paper), written once for every space:
// an upsweep of batched QR. Leaves: U_t = Q_t R_t. Level by level upwards: the stacked transfers of
// a parent, premultiplied by the children's R, [R_c1 E_c1; R_c2 E_c2] = Q R_parent, and Q becomes the
// new stacked transfer. The coupling matrices absorb the factors: S_ts <- R^U_t S_ts (R^V_s)^T, so the
// operator is unchanged. Ranks stay uniform per level, capped at what an orthonormal basis can hold
// (m_max at the leaves, twice the children's rank above): a node with fewer points than its rank keeps
// zero columns (its basis is orthonormal on the columns it has).
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/primitives/items.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace h2expr::detail {

// Pointer array base + offsets[i], in the space.
template <class T, class Space>
buffer<T*, Space> pointers(const context_ptr<Space>& ctx, T* base, const std::vector<std::int64_t>& offsets) {
  buffer<T*, Space> p(ctx, offsets.size());
  if (offsets.empty()) return p;
  buffer<std::int64_t, Space> off(ctx, offsets);
  marshal_offsets(*ctx, base, off.data(), int(offsets.size()), p.data());  // off is freed after it, in stream order
  return p;
}

// Columns p[i] .. cols-1 of item i (rows x cols at base + i stride, ld) set to zero. A gemm with
// alpha = beta = 0 writes C without reading anything (BLAS semantics), on both spaces.
template <class T, class Space>
void zero_trailing_columns(const context_ptr<Space>& ctx, T* base, std::int64_t stride, int rows, int ld, int cols,
                           const std::vector<int>& p) {
  std::vector<std::int64_t> offsets;
  std::vector<int> widths;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] < cols) offsets.push_back(std::int64_t(i) * stride + std::int64_t(p[i]) * ld), widths.push_back(cols - p[i]);
  if (offsets.empty()) return;
  const int count = int(offsets.size());
  auto ptr = pointers(ctx, base, offsets);
  buffer<int, Space> m(ctx, std::vector<int>(count, rows)), n(ctx, widths), k(ctx, std::vector<int>(count, 0)),
      lds(ctx, std::vector<int>(count, ld));
  gemm_vbatched(*ctx, op::none, op::none, m.data(), n.data(), k.data(), T(0), (const T* const*)ptr.data(), lds.data(),
                (const T* const*)ptr.data(), lds.data(), T(0), ptr.data(), lds.data(), count, rows, cols, 0);
}

// Thin QR of `count` items at a fixed stride (m[i] x n at base + i stride, ld; items.hpp's qr_items
// takes offsets), Q in place (unless !form_q: then the items are left unspecified; with it, columns
// past min(m[i], n) zero), R (ldr x n per item, ld ldr >= min(m[i], n): zero below the diagonal and in
// rows past min(m[i], n)) into R.
template <class T, class Space>
void qr_strided(const context_ptr<Space>& ctx, T* base, std::int64_t stride, int ld, const std::vector<int>& m, int n,
                T* R, int ldr, bool form_q = true) {
  const int count = int(m.size());
  if (count == 0 || n == 0) return;
  for (const int rows : m) require(ldr >= std::min(rows, n), "qr_strided: R's leading dimension below its rows");
  fill(*ctx, R, std::size_t(count) * ldr * n, T(0));
  buffer<int, Space> M(ctx, m), N(ctx, std::vector<int>(count, n)), LD(ctx, std::vector<int>(count, ld)),
      LDR(ctx, std::vector<int>(count, ldr));
  buffer<T*, Space> P(ctx, std::size_t(count)), PR(ctx, std::size_t(count));
  marshal_strided(*ctx, base, stride, count, P.data());
  marshal_strided(*ctx, R, std::int64_t(ldr) * n, count, PR.data());
  const int max_m = *std::max_element(m.begin(), m.end());
  if (!form_q) {
    qr_r_vbatched(*ctx, M.data(), N.data(), P.data(), LD.data(), PR.data(), LDR.data(), count, max_m, n);
    return;
  }
  qr_vbatched(*ctx, M.data(), N.data(), P.data(), LD.data(), PR.data(), LDR.data(), count, max_m, n);
  std::vector<int> p(count);
  for (int i = 0; i < count; ++i) p[i] = std::min(m[i], n);
  zero_trailing_columns<T, Space>(ctx, base, stride, ld, ld, n, p);
}

// Ranks an orthonormal basis needs at most: a leaf spans at most m_max columns, a parent at most its
// children's together. Orthogonalization stores no more (the extra columns would be zero).
inline std::vector<int> orthogonal_ranks(const std::vector<int>& rank, int m_max) {
  std::vector<int> r(rank);
  const int L = int(rank.size()) - 1;
  r[L] = std::min(rank[L], m_max);
  for (int l = L - 1; l >= 0; --l) r[l] = std::min(rank[l], 2 * r[l + 1]);
  return r;
}

// Orthogonalizes one basis tree in place, to the ranks r (orthogonal_ranks); returns its R factors per
// level (nodes x rank x rank, ld rank, rows past r zero).
template <class T, class Space>
std::vector<buffer<T, Space>> orthogonalize_basis(const context_ptr<Space>& ctx, basis_tree<T, Space>& B,
                                                  const std::vector<int>& rank, const std::vector<int>& r, int m_max,
                                                  const cluster_tree& tree) {
  const int L = tree.depth, leaves = 1 << L;
  std::vector<buffer<T, Space>> R(L + 1);
  for (int l = 0; l <= L; ++l) R[l] = buffer<T, Space>(ctx, (std::size_t(1) << l) * rank[l] * rank[l]);
  std::vector<int> sizes(leaves);
  for (int i = 0; i < leaves; ++i) sizes[i] = tree.size(cluster_tree::level_begin(L) + i);
  qr_strided<T, Space>(ctx, B.leaves.data(), std::int64_t(m_max) * rank[L], m_max, sizes, rank[L], R[L].data(), rank[L]);
  if (r[L] < rank[L]) {  // the first r[L] columns of each leaf's Q
    buffer<T, Space> leaves_r(ctx, std::size_t(leaves) * m_max * r[L]);
    std::vector<std::int64_t> so(leaves), dof(leaves);
    for (int a = 0; a < leaves; ++a) so[a] = std::int64_t(a) * m_max * rank[L], dof[a] = std::int64_t(a) * m_max * r[L];
    if (r[L] > 0) {
      auto ps = pointers(ctx, B.leaves.data(), so), pd = pointers(ctx, leaves_r.data(), dof);
      copy_batched(*ctx, m_max, r[L], (const T* const*)ps.data(), m_max, pd.data(), m_max, leaves);
    }
    B.leaves = std::move(leaves_r);
  }
  for (int l = L; l >= 1; --l) {
    const int kc = rank[l], kp = rank[l - 1], rc = r[l], rp = r[l - 1], parents = 1 << (l - 1);
    if (kp == 0) {
      B.transfers[l] = buffer<T, Space>(ctx, 0);
      continue;
    }
    if (rc == 0) {
      fill(*ctx, R[l - 1].data(), R[l - 1].size(), T(0));
      B.transfers[l] = buffer<T, Space>(ctx, 0);
      continue;
    }
    // [R_c1 E_c1; R_c2 E_c2] with the rc nonzero rows of each R: 2 rc x kp per parent.
    buffer<T, Space> W(ctx, std::size_t(parents) * 2 * rc * kp);
    for (int h = 0; h < 2; ++h)  // child h of every parent into its half of the stack
      gemm_strided_batched(*ctx, op::none, op::none, rc, kp, kc, T(1), R[l].data() + std::int64_t(h) * kc * kc, kc,
                           std::int64_t(2) * kc * kc, B.transfers[l].data() + h * kc, 2 * kc,
                           std::int64_t(2) * kc * kp, T(0), W.data() + h * rc, 2 * rc, std::int64_t(2) * rc * kp,
                           parents);
    qr_strided<T, Space>(ctx, W.data(), std::int64_t(2) * rc * kp, 2 * rc, std::vector<int>(parents, 2 * rc), kp,
                         R[l - 1].data(), kp);
    // The new transfers: the first rp columns of Q (contiguous per parent, ld 2 rc).
    if (rp < kp) {
      buffer<T, Space> E(ctx, std::size_t(parents) * 2 * rc * rp);
      std::vector<std::int64_t> so(parents), dof(parents);
      for (int j = 0; j < parents; ++j) so[j] = std::int64_t(j) * 2 * rc * kp, dof[j] = std::int64_t(j) * 2 * rc * rp;
      if (rp > 0) {
        auto ps = pointers(ctx, W.data(), so), pd = pointers(ctx, E.data(), dof);
        copy_batched(*ctx, 2 * rc * rp, 1, (const T* const*)ps.data(), 2 * rc * rp, pd.data(), 2 * rc * rp, parents);
      }
      W = std::move(E);
    }
    B.transfers[l] = std::move(W);
  }
  B.orthonormal = true;
  return R;
}

// Bytes of intermediate products per chunk of transform_coupling: what the host's caches hold (2D
// orthogonalization 0.286 -> 0.262 s with 4 MB; 256 KB to 16 MB within 3%), a whole level on the GPU.
template <class Space>
constexpr std::size_t projection_chunk_bytes() {
  return std::is_same_v<Space, host> ? std::size_t(1) << 22 : std::size_t(1) << 30;
}

// op_l(X_t) S_b op_r(Y_s) for every coupling block b = (t, s) of every level, from rank k to rank
// r[l]; X and Y hold a rank x rank matrix per node (only r[l] of their rows/columns enter).
// Orthogonalization applies R_t S R_s^T (r = k), truncation P_t^T S P_s. For a symmetric matrix with
// one basis, transformed by one set of factors from both sides, block (s, t) is block (t, s)
// transposed: only the blocks with t < s are multiplied, the others copied (half the products).
template <class T, class Space>
std::vector<buffer<T, Space>> transform_coupling(const h2_data<T, Space>& A, const std::vector<buffer<T, Space>>& X,
                                                 op op_l, const std::vector<buffer<T, Space>>& Y, op op_r,
                                                 const std::vector<int>& r) {
  const auto& ctx = A.ctx;
  const auto& blocks = A.structure.blocks();
  const bool mirrored = A.symmetric && A.row_basis == A.col_basis && A.structure.symmetric_trees() && &X == &Y &&
                        op_l != op_r;
  std::vector<buffer<T, Space>> out(A.depth() + 1);
  for (int l = 0; l <= A.depth(); ++l) {
    const auto& lv = blocks.coupling[l];
    const int k = A.rank[l], rl = r[l], count = lv.blocks();
    buffer<T, Space> S(ctx, std::size_t(count) * rl * rl);
    if (k > 0 && rl > 0 && count > 0) {
      std::vector<std::int64_t> xo, yo, bo, so;
      std::vector<item_copy> mirror;
      for (int t = 0; t + 1 < int(lv.row_ptr.size()); ++t)
        for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) {
          const int s = lv.col[b];
          if (mirrored && s < t) {  // (s, t), with t' = s < s' = t, is multiplied: copy its transpose
            const auto first = lv.col.begin() + lv.row_ptr[s], last = lv.col.begin() + lv.row_ptr[s + 1];
            const auto at = std::lower_bound(first, last, t);
            if (at != last && *at == t) {
              mirror.push_back({rl, rl, std::int64_t(at - lv.col.begin()) * rl * rl, std::int64_t(b) * rl * rl, rl, rl});
              continue;
            }
          }
          xo.push_back(std::int64_t(t) * k * k), yo.push_back(std::int64_t(s) * k * k);
          bo.push_back(std::int64_t(b) * k * k), so.push_back(std::int64_t(b) * rl * rl);
        }
      const int products = int(bo.size());  // at least one: a mirrored block's partner is multiplied
      // Both products run a chunk of blocks at a time, so that the intermediate op(X_t) S_ts is still in
      // cache for the second (each thread's items are the same in both: a static schedule).
      const int chunk = int(std::clamp<std::size_t>(projection_chunk_bytes<Space>() / (sizeof(T) * rl * k), 1, products));
      std::vector<std::int64_t> to(chunk);
      for (int i = 0; i < chunk; ++i) to[i] = std::int64_t(i) * rl * k;
      buffer<T, Space> tmp(ctx, std::size_t(chunk) * rl * k);
      auto px = pointers(ctx, const_cast<T*>(X[l].data()), xo), py = pointers(ctx, const_cast<T*>(Y[l].data()), yo);
      auto pb = pointers(ctx, const_cast<T*>(A.coupling[l].data()), bo), pt = pointers(ctx, tmp.data(), to), pn = pointers(ctx, S.data(), so);
      for (int first = 0; first < products; first += chunk) {
        const int n = std::min(chunk, products - first);
        gemm_batched(*ctx, op_l, op::none, rl, k, k, T(1), (const T* const*)px.data() + first, k,
                     (const T* const*)pb.data() + first, k, T(0), pt.data(), rl, n);
        gemm_batched(*ctx, op::none, op_r, rl, rl, k, T(1), (const T* const*)pt.data(), rl,
                     (const T* const*)py.data() + first, k, T(0), pn.data() + first, rl, n);
      }
      copy_items(ctx, S.data(), S.data(), std::move(mirror), op::transpose);
    }
    out[l] = std::move(S);
  }
  return out;
}

template <class T, class Space>
void orthogonalize(h2_data<T, Space>& A) {
  const auto& tree = A.structure.row_tree();
  const auto r = orthogonal_ranks(A.rank, A.m_max);
  auto Rrow = orthogonalize_basis(A.ctx, *A.row_basis, A.rank, r, A.m_max, tree);
  if (A.col_basis == A.row_basis) {
    A.coupling = transform_coupling(A, Rrow, op::none, Rrow, op::transpose, r);
  } else {
    auto Rcol = orthogonalize_basis(A.ctx, *A.col_basis, A.rank, r, A.m_max, A.structure.col_tree());
    A.coupling = transform_coupling(A, Rrow, op::none, Rcol, op::transpose, r);
  }
  A.rank = r;
}

}  // namespace h2expr::detail
