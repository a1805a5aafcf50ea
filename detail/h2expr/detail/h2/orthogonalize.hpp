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

// Columns p[i] .. cols-1 of item i (rows x cols at base + i stride, ld) set to zero.
template <class T, class Space>
void zero_trailing_columns(const context_ptr<Space>& ctx, T* base, std::int64_t stride, int rows, int ld, int cols,
                           const std::vector<int>& p) {
  batch<T, Space> trailing(ctx);
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] < cols) trailing.add(base + std::int64_t(i) * stride + std::int64_t(p[i]) * ld, rows, cols - p[i], ld);
  zero(trailing);
}

// Thin QR of `count` items at a fixed stride (m[i] x n at base + i stride, ld), Q in place (unless
// !form_q: then the items are left unspecified; with it, columns past min(m[i], n) zero), R (ldr x n
// per item, ld ldr >= min(m[i], n): zero below the diagonal and in rows past min(m[i], n)) into R.
template <class T, class Space>
void qr_strided(const context_ptr<Space>& ctx, T* base, std::int64_t stride, int ld, const std::vector<int>& m, int n,
                T* R, int ldr, bool form_q = true) {
  const int count = int(m.size());
  if (count == 0 || n == 0) return;
  for (const int rows : m) require(ldr >= std::min(rows, n), "qr_strided: R's leading dimension below its rows");
  fill(*ctx, R, std::size_t(count) * ldr * n, T(0));
  batch<T, Space> a(ctx), r(ctx);
  a.reserve(count), r.reserve(count);
  for (int i = 0; i < count; ++i)
    a.add(base + i * stride, m[i], n, ld), r.add(R + std::int64_t(i) * ldr * n, std::min(m[i], n), n, ldr);
  qr(a, &r, form_q);
  if (!form_q) return;
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

// The QR of one level's stacks W (parents x [2 rc x kp], ld 2 rc) when some children have fewer than
// rc columns, own[c] (a leaf with fewer points than its rank, or a node of a compact matrix padded for
// the upsweep): child c's rows past own[c] are zero in W, but where a stack is numerically
// rank-deficient Householder gives Q components in them, which multiply zero columns of the child (or
// which compact() drops): a kept column loses its norm. So the children's own rows are stacked
// without the gap, factored, and put back: Q is exactly zero in the others. R as qr_strided's.
template <class T, class Space>
void qr_own_rows(const context_ptr<Space>& ctx, buffer<T, Space>& W, int parents, int rc, int kp,
                 const std::vector<int>& own, T* R) {
  const std::int64_t stride = std::int64_t(2) * rc * kp;
  buffer<T, Space> G(ctx, W.size());
  batch<T, Space> padded(ctx), gapless(ctx);
  std::vector<int> m(parents);
  for (int j = 0; j < parents; ++j) {
    const int a = own[2 * j], b = own[2 * j + 1];
    m[j] = a + b;
    if (a > 0) padded.add(W.data() + j * stride, a, kp, 2 * rc), gapless.add(G.data() + j * stride, a, kp, 2 * rc);
    if (b > 0)
      padded.add(W.data() + j * stride + rc, b, kp, 2 * rc), gapless.add(G.data() + j * stride + a, b, kp, 2 * rc);
  }
  copy(padded, gapless);
  qr_strided<T, Space>(ctx, G.data(), stride, 2 * rc, m, kp, R, kp);
  fill(*ctx, W.data(), W.size(), T(0));
  copy(gapless, padded);
}

// The columns each node's new orthonormal basis has (past them its Q is zero), per level and node: a
// leaf at most its points, a parent at most its children's together (each child at most r, the
// orthogonal rank of its level), every node at most its rank (node_rank, for a compact basis padded
// for the upsweep; else the level's). A function of the tree and the ranks alone, so that every rank
// of a distributed matrix knows it for the whole tree.
inline std::vector<std::vector<int>> basis_columns(const cluster_tree& tree, const std::vector<int>& rank,
                                                   const std::vector<int>& r,
                                                   const std::vector<std::vector<int>>* node_rank = nullptr) {
  const int L = tree.depth;
  std::vector<std::vector<int>> have(L + 1);
  for (int l = L; l >= 0; --l) {
    have[l].resize(std::size_t(1) << l);
    for (int t = 0; t < 1 << l; ++t) {
      const int below = l == L ? tree.size(cluster_tree::level_begin(L) + t)
                               : std::min(have[l + 1][2 * t], r[l + 1]) + std::min(have[l + 1][2 * t + 1], r[l + 1]);
      have[l][t] = std::min(below, node_rank ? (*node_rank)[l][t] : rank[l]);
    }
  }
  return have;
}

// One level of the upsweep over `parents` parents (children of parent j at 2j, 2j + 1): from the
// children's R factors (kc x kc each at Rc, first rc rows nonzero) and the stacked transfers [E_2j;
// E_2j+1] (2 kc x kp each at E), the parents' R factors (kp x kp each into Rp) and their new transfers
// (2 rc x rp each, returned). have: basis_columns of the children's level (from the first child).
template <class T, class Space>
buffer<T, Space> orthogonalize_level(const context_ptr<Space>& ctx, const T* Rc, const T* E, int parents, int kc, int kp,
                                     int rc, int rp, T* Rp, const int* have) {
  if (kp == 0 || parents == 0) return buffer<T, Space>(ctx, 0);
  if (rc == 0) {
    fill(*ctx, Rp, std::size_t(parents) * kp * kp, T(0));
    return buffer<T, Space>(ctx, 0);
  }
  // [R_c1 E_c1; R_c2 E_c2] with the rc nonzero rows of each R: 2 rc x kp per parent.
  buffer<T, Space> W(ctx, std::size_t(parents) * 2 * rc * kp);
  for (int h = 0; h < 2; ++h)  // child h of every parent into its half of the stack
    gemm_strided_batched(*ctx, op::none, op::none, rc, kp, kc, T(1), Rc + std::int64_t(h) * kc * kc, kc,
                         std::int64_t(2) * kc * kc, E + h * kc, 2 * kc, std::int64_t(2) * kc * kp, T(0),
                         W.data() + h * rc, 2 * rc, std::int64_t(2) * rc * kp, parents);
  std::vector<int> own(std::size_t(2) * parents);  // the rows of child c's stack that can be nonzero
  for (int c = 0; c < 2 * parents; ++c) own[c] = std::min(have[c], rc);
  if (std::all_of(own.begin(), own.end(), [rc](int k) { return k == rc; }))
    qr_strided<T, Space>(ctx, W.data(), std::int64_t(2) * rc * kp, 2 * rc, std::vector<int>(parents, 2 * rc), kp, Rp, kp);
  else
    qr_own_rows<T, Space>(ctx, W, parents, rc, kp, own, Rp);
  if (rp == kp) return W;
  // The new transfers: the first rp columns of Q (contiguous per parent, ld 2 rc).
  buffer<T, Space> trimmed(ctx, std::size_t(parents) * 2 * rc * rp);
  if (rp > 0)
    copy(batch<const T, Space>(ctx, W.data(), std::int64_t(2) * rc * kp, parents, 2 * rc, rp, 2 * rc),
         batch<T, Space>(ctx, trimmed.data(), std::int64_t(2) * rc * rp, parents, 2 * rc, rp, 2 * rc));
  return trimmed;
}

// The leaves' step of the upsweep, for `count` leaves from leaf `first` (m x k each, ld m): Q in place,
// cut to its first r columns; the R factors (k x k each) into R.
template <class T, class Space>
void orthogonalize_leaves(const context_ptr<Space>& ctx, buffer<T, Space>& leaves, const cluster_tree& tree, int first,
                          int count, int m, int k, int r, T* R) {
  if (count == 0 || k == 0) return;
  std::vector<int> sizes(count);
  for (int i = 0; i < count; ++i) sizes[i] = tree.size(cluster_tree::level_begin(tree.depth) + first + i);
  qr_strided<T, Space>(ctx, leaves.data(), std::int64_t(m) * k, m, sizes, k, R, k);
  if (r == k) return;
  buffer<T, Space> cut(ctx, std::size_t(count) * m * r);
  if (r > 0)
    copy(batch<const T, Space>(ctx, leaves.data(), std::int64_t(m) * k, count, m, r, m),
         batch<T, Space>(ctx, cut.data(), std::int64_t(m) * r, count, m, r, m));
  leaves = std::move(cut);
}

// Orthogonalizes one basis tree in place, to the ranks r (orthogonal_ranks); returns its R factors per
// level (nodes x rank x rank, ld rank, rows past r zero). node_rank, for a compact basis padded for
// the upsweep, gives the columns each node really has (per level and node; see qr_own_rows); they come
// back lowered to basis_columns: a node with more than its children's together (or a leaf with more
// than its points) has dependent ones, which become zero (as do their R rows).
template <class T, class Space>
std::vector<buffer<T, Space>> orthogonalize_basis(const context_ptr<Space>& ctx, basis_tree<T, Space>& B,
                                                  const std::vector<int>& rank, const std::vector<int>& r, int m_max,
                                                  const cluster_tree& tree,
                                                  std::vector<std::vector<int>>* node_rank = nullptr) {
  const int L = tree.depth, leaves = 1 << L;
  std::vector<buffer<T, Space>> R(L + 1);
  for (int l = 0; l <= L; ++l) R[l] = buffer<T, Space>(ctx, (std::size_t(1) << l) * rank[l] * rank[l]);
  orthogonalize_leaves<T, Space>(ctx, B.leaves, tree, 0, leaves, m_max, rank[L], r[L], R[L].data());
  auto have = basis_columns(tree, rank, r, node_rank);
  for (int l = L; l >= 1; --l)
    B.transfers[l] = orthogonalize_level<T, Space>(ctx, R[l].data(), B.transfers[l].data(), 1 << (l - 1), rank[l],
                                                   rank[l - 1], r[l], r[l - 1], R[l - 1].data(), have[l].data());
  if (node_rank) *node_rank = std::move(have);
  B.orthonormal = true;
  return R;
}

// Bytes of intermediate products per chunk of transform_coupling: what the host's caches hold (2D
// orthogonalization 0.286 -> 0.262 s with 4 MB; 256 KB to 16 MB within 3%), a whole level on the GPU.
template <class Space>
constexpr std::size_t projection_chunk_bytes() {
  return space_traits<Space>::chunk_bytes(std::size_t(1) << 22);
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
      std::vector<int> xt, ys, bb;  // the multiplied blocks: row node, column node, block
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
          xt.push_back(t), ys.push_back(s), bb.push_back(b);
        }
      const int products = int(bb.size());  // at least one: a mirrored block's partner is multiplied
      // Both products run a chunk of blocks at a time, so that the intermediate op(X_t) S_ts is still in
      // cache for the second (each thread's items are the same in both: a static schedule).
      const int chunk = int(std::clamp<std::size_t>(projection_chunk_bytes<Space>() / (sizeof(T) * rl * k), 1, products));
      buffer<T, Space> tmp(ctx, std::size_t(chunk) * rl * k);
      for (int first = 0; first < products; first += chunk) {
        const int n = std::min(chunk, products - first);
        // op(X_t) is rl x k: X's first rl rows (op none) or columns (transpose) of a k x k block.
        const int xr = op_l == op::none ? rl : k, xc = op_l == op::none ? k : rl;
        const int yr = op_r == op::none ? k : rl, yc = op_r == op::none ? rl : k;
        batch<const T, Space> x(ctx), y(ctx), s(ctx);
        batch<T, Space> st(ctx);
        for (int i = first; i < first + n; ++i) {
          x.add(X[l].data() + std::int64_t(xt[i]) * k * k, xr, xc, k);
          y.add(Y[l].data() + std::int64_t(ys[i]) * k * k, yr, yc, k);
          s.add(A.coupling[l].data() + std::int64_t(bb[i]) * k * k, k, k, k);
          st.add(S.data() + std::int64_t(bb[i]) * rl * rl, rl, rl, rl);
        }
        const batch<T, Space> t(ctx, tmp.data(), std::int64_t(rl) * k, n, rl, k, rl);
        gemm(op_l, op::none, T(1), x, s, T(0), t);
        gemm(op::none, op_r, T(1), t, y, T(0), st);
      }
      copy_items(ctx, S.data(), S.data(), std::move(mirror), op::transpose);
    }
    out[l] = std::move(S);
  }
  return out;
}

// On the uniform layout; row_ranks and col_ranks (null: uniform) are the node ranks of a compact
// matrix that pad() has just made uniform, lowered where a node cannot hold them (orthogonalize_basis);
// with one basis, col_ranks gets row_ranks' values.
template <class T, class Space>
void orthogonalize(h2_data<T, Space>& A, std::vector<std::vector<int>>* row_ranks = nullptr,
                   std::vector<std::vector<int>>* col_ranks = nullptr) {
  require(!A.compact(), "orthogonalize: pad() the matrix first");
  const auto& tree = A.structure.row_tree();
  const auto r = orthogonal_ranks(A.rank, A.m_max);
  auto Rrow = orthogonalize_basis(A.ctx, *A.row_basis, A.rank, r, A.m_max, tree, row_ranks);
  if (A.col_basis == A.row_basis) {
    if (row_ranks && col_ranks) *col_ranks = *row_ranks;
    A.coupling = transform_coupling(A, Rrow, op::none, Rrow, op::transpose, r);
  } else {
    auto Rcol = orthogonalize_basis(A.ctx, *A.col_basis, A.rank, r, A.m_max, A.structure.col_tree(), col_ranks);
    A.coupling = transform_coupling(A, Rrow, op::none, Rcol, op::transpose, r);
  }
  A.rank = r;
}

}  // namespace h2expr::detail
