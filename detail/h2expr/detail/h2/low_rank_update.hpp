#pragma once
// The low-rank update of an H2 matrix in H2 form, level by level: H += sum over the sibling blocks
// (t, t^1) of a level l of Wrow(t) Wcol(t^1)^T. The update's columns are made orthonormal and nested
// from the leaves up and appended to the bases (capped at what each node can hold: a sibling block's
// rank may be hundreds, a leaf holds m), coupling blocks R_a R_b^T go under the updated blocks and the
// products into the dense leaves. HARA builds its matrix from zero_h2 by one such update per level
// (randomized/hara.hpp); compress() afterwards keeps the ranks minimal. Written once for every space.
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/h2/orthogonalize.hpp>
#include <h2expr/detail/primitives/batched.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace h2expr::detail {

// use[l][t]: whether the sibling block (t, t^1) of level l holds a block of the matrix tree (a
// coupling block or a dense leaf whose row and column ancestors split at level l).
inline std::vector<std::vector<char>> sibling_blocks_in_use(const matrix_tree& mt) {
  const int L = mt.depth();
  std::vector<std::vector<char>> use(std::size_t(L) + 1);
  for (int l = 0; l <= L; ++l) use[l].assign(std::size_t(1) << l, 0);
  auto mark = [&](int level, int a, int b) {
    for (int l = 1; l <= level; ++l) {
      const int sa = a >> (level - l), sb = b >> (level - l);
      if (sa != sb) {
        use[l][sa] = 1;
        return;
      }
    }
  };
  for (int l = 0; l <= L; ++l) {
    const auto& lv = mt.coupling[l];
    for (int t = 0; t < lv.level_size(); ++t)
      for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) mark(l, t, lv.col[b]);
  }
  const auto& dn = mt.dense;
  for (int t = 0; t < dn.level_size(); ++t)
    for (int b = dn.row_ptr[t]; b < dn.row_ptr[t + 1]; ++b) mark(L, t, dn.col[b]);
  return use;
}

// An H2 matrix of rank 0 on the structure: the start of the construction.
template <class T, class Space>
h2_data<T, Space> zero_h2(const context_ptr<Space>& ctx, const ::h2expr::structure<T>& S, bool symmetric) {
  h2_data<T, Space> H;
  const auto& tree = S.row_tree();
  const int L = S.depth();
  H.ctx = ctx, H.structure = S, H.symmetric = symmetric;
  H.m_max = std::max(tree.max_leaf_size, 1);
  H.rank.assign(std::size_t(L) + 1, 0);
  H.arrays = std::make_shared<const space_structure<Space>>(ctx, tree, S.blocks(), H.m_max);
  H.row_basis = std::make_shared<basis_tree<T, Space>>();
  H.row_basis->transfers.resize(std::size_t(L) + 1);
  if (symmetric) {
    H.col_basis = H.row_basis;
  } else {
    H.col_basis = std::make_shared<basis_tree<T, Space>>();
    H.col_basis->transfers.resize(std::size_t(L) + 1);
  }
  H.coupling.resize(std::size_t(L) + 1);
  H.dense = buffer<T, Space>(ctx, std::size_t(S.blocks().dense.blocks()) * H.m_max * H.m_max);
  fill(*ctx, H.dense.data(), H.dense.size(), T(0));
  return H;
}

// dst[i] = src[i] (rows x cols blocks) for pointer offsets into two bases.
template <class T, class Space>
void copy_blocks(const context_ptr<Space>& ctx, int rows, int cols, const T* src, const std::vector<std::int64_t>& so,
                 int lds, T* dst, const std::vector<std::int64_t>& dof, int ldd) {
  if (rows == 0 || cols == 0) return;
  batch<const T, Space> s(ctx);
  batch<T, Space> d(ctx);
  for (std::size_t i = 0; i < so.size(); ++i) s.add(src + so[i], rows, cols, lds), d.add(dst + dof[i], rows, cols, ldd);
  copy(s, d);
}

// The explicit update columns W of level l (node t: P x k, ld P, nodes one after another) in nested
// orthonormal form, built bottom-up like orthogonalize(): W restricted to a node t' of level lc >= l is
// U_t' R_t' with U_t' orthonormal and nested (leaves Q of qr(W|_leaf), transfers Q of qr([R_c1; R_c2]))
// and R_t' (u[lc] x k). The ranks u are capped at what the node can hold (m at the leaves, twice the
// children's above), so a high-rank update never costs more than that at the fine levels.
template <class T, class Space>
struct update_level {
  std::vector<int> u;                        // rank per level (0 above l)
  buffer<T, Space> leaves;                   // leaves x m x u[L]
  std::vector<buffer<T, Space>> transfers;   // lc = l+1..L: parents x (2 u[lc] x u[lc-1])
  std::vector<buffer<T, Space>> R;           // lc = l..L: nodes x (u[lc] x k), ld u[lc]
};

template <class T, class Space>
class update_builder {
 public:
  update_builder(const h2_data<T, Space>& H, int l, int k, const T* W)
      : ctx_(H.ctx), L_(H.depth()), l_(l), k_(k), m_(H.m_max), W_(W) {
    const auto& tree = H.structure.row_tree();
    out_.u.assign(std::size_t(L_) + 1, 0);
    out_.u[L_] = std::min(k, m_);
    for (int lc = L_ - 1; lc >= l; --lc) out_.u[lc] = std::min(k, 2 * out_.u[lc + 1]);
    out_.transfers.resize(std::size_t(L_) + 1);
    out_.R.resize(std::size_t(L_) + 1);
    for (int a = 0; a < (1 << L_); ++a) leaf_sizes_.push_back(tree.size(cluster_tree::level_begin(L_) + a));
  }
  const std::vector<int>& ranks() const { return out_.u; }

  // Level lc's R factors (the leaves first, then upwards); each level needs the one below.
  const buffer<T, Space>& level(int lc) {
    const int leaves = 1 << L_, P = m_ << (L_ - l_), uL = out_.u[L_];
    if (lc == L_) {
      buffer<T, Space> Wl(ctx_, std::size_t(leaves) * m_ * k_);
      std::vector<std::int64_t> wo(leaves), lo(leaves);
      for (int a = 0; a < leaves; ++a) {
        const int t = a >> (L_ - l_), j = a - (t << (L_ - l_));
        wo[a] = std::int64_t(t) * P * k_ + std::int64_t(j) * m_, lo[a] = std::int64_t(a) * m_ * k_;
      }
      copy_blocks(ctx_, m_, k_, W_, wo, P, Wl.data(), lo, m_);
      out_.R[L_] = buffer<T, Space>(ctx_, std::size_t(leaves) * uL * k_);
      qr_strided<T, Space>(ctx_, Wl.data(), std::int64_t(m_) * k_, m_, leaf_sizes_, k_, out_.R[L_].data(), uL);
      out_.leaves = buffer<T, Space>(ctx_, std::size_t(leaves) * m_ * uL);
      std::vector<std::int64_t> q(leaves);
      for (int a = 0; a < leaves; ++a) q[a] = std::int64_t(a) * m_ * uL;
      copy_blocks(ctx_, m_, uL, Wl.data(), lo, m_, out_.leaves.data(), q, m_);
      return out_.R[L_];
    }
    const int uc = out_.u[lc + 1], up = out_.u[lc], parents = 1 << lc;
    buffer<T, Space> S(ctx_, std::size_t(parents) * 2 * uc * k_);  // [R_c1; R_c2] per parent
    std::vector<std::int64_t> so(2 * parents), sd(2 * parents);
    for (int c = 0; c < 2 * parents; ++c)
      so[c] = std::int64_t(c) * uc * k_, sd[c] = std::int64_t(c >> 1) * 2 * uc * k_ + std::int64_t(c & 1) * uc;
    copy_blocks(ctx_, uc, k_, out_.R[lc + 1].data(), so, uc, S.data(), sd, 2 * uc);
    out_.R[lc + 1] = buffer<T, Space>();  // no longer needed
    out_.R[lc] = buffer<T, Space>(ctx_, std::size_t(parents) * up * k_);
    qr_strided<T, Space>(ctx_, S.data(), std::int64_t(2) * uc * k_, 2 * uc, std::vector<int>(parents, 2 * uc), k_,
                         out_.R[lc].data(), up);
    // The transfers into level lc: the first up columns of each Q (contiguous, ld 2 uc).
    out_.transfers[lc + 1] = buffer<T, Space>(ctx_, std::size_t(parents) * 2 * uc * up);
    std::vector<std::int64_t> qo(parents), qd(parents);
    for (int j = 0; j < parents; ++j) qo[j] = std::int64_t(j) * 2 * uc * k_, qd[j] = std::int64_t(j) * 2 * uc * up;
    copy_blocks(ctx_, 2 * uc * up, 1, S.data(), qo, 2 * uc * up, out_.transfers[lc + 1].data(), qd, 2 * uc * up);
    return out_.R[lc];
  }
  update_level<T, Space>& result() { return out_; }

 private:
  context_ptr<Space> ctx_;
  int L_, l_, k_, m_;
  const T* W_;
  std::vector<int> leaf_sizes_;
  update_level<T, Space> out_;
};

// The basis tree B with the update's nested columns appended from level l down: leaves [U U_upd],
// transfers below l block diagonal [E 0; 0 E_upd], those into level l - 1 zero rows for the new columns.
template <class T, class Space>
basis_tree<T, Space> extended_basis(const h2_data<T, Space>& H, const basis_tree<T, Space>& B, int l,
                                    const update_level<T, Space>& U, const std::vector<int>& r) {
  const auto& ctx = H.ctx;
  const int L = H.depth(), m = H.m_max, leaves = 1 << L;
  basis_tree<T, Space> N;
  N.transfers.resize(std::size_t(L) + 1);
  const int kL = H.rank[L], nL = r[L], uL = U.u[L];
  N.leaves = buffer<T, Space>(ctx, std::size_t(leaves) * m * nL);
  std::vector<std::int64_t> so(leaves), dof(leaves), uo(leaves), ud(leaves);
  for (int a = 0; a < leaves; ++a) {
    so[a] = std::int64_t(a) * m * kL, dof[a] = std::int64_t(a) * m * nL;
    uo[a] = std::int64_t(a) * m * uL, ud[a] = dof[a] + std::int64_t(kL) * m;
  }
  copy_blocks(ctx, m, kL, B.leaves.data(), so, m, N.leaves.data(), dof, m);
  copy_blocks(ctx, m, uL, U.leaves.data(), uo, m, N.leaves.data(), ud, m);
  for (int lc = 1; lc <= L; ++lc) {
    if (lc < l) {
      N.transfers[lc] = clone(B.transfers[lc]);
      continue;
    }
    const int kc = H.rank[lc], kp = H.rank[lc - 1], rc = r[lc], rp = r[lc - 1], halves = 1 << lc;
    const int uc = U.u[lc], up = U.u[lc - 1];
    N.transfers[lc] = buffer<T, Space>(ctx, std::size_t(halves) * rc * rp);
    fill(*ctx, N.transfers[lc].data(), N.transfers[lc].size(), T(0));
    std::vector<std::int64_t> o_old(halves), o_new(halves), o_upd(halves), o_at(halves);
    for (int c = 0; c < halves; ++c) {
      const int j = c >> 1, h = c & 1;
      o_old[c] = std::int64_t(j) * 2 * kc * kp + h * kc;
      o_new[c] = std::int64_t(j) * 2 * rc * rp + h * rc;
      o_upd[c] = std::int64_t(j) * 2 * uc * up + h * uc;
      o_at[c] = o_new[c] + kc + std::int64_t(kp) * 2 * rc;
    }
    copy_blocks(ctx, kc, kp, B.transfers[lc].data(), o_old, 2 * kc, N.transfers[lc].data(), o_new, 2 * rc);
    if (lc > l) copy_blocks(ctx, uc, up, U.transfers[lc].data(), o_upd, 2 * uc, N.transfers[lc].data(), o_at, 2 * rc);
  }
  return N;
}

// H += sum over the used sibling blocks (t, t^1) of level l of Wrow(t) Wcol(t^1)^T, kept in H2 form:
// the update's orthonormal nested columns appended to the bases (update_builder, extended_basis),
// coupling blocks R_a R_b^T under the updated blocks, and the products added to the dense leaves.
template <class T, class Space>
void append_level_update(h2_data<T, Space>& H, int l, int k, const T* Wrow, const T* Wcol, const std::vector<char>& used) {
  const auto& ctx = H.ctx;
  const auto& mt = H.structure.blocks();
  const int L = H.depth(), m = H.m_max, P = m << (L - l);
  const bool shared = H.row_basis == H.col_basis;
  update_builder<T, Space> row_update(H, l, k, Wrow);
  std::unique_ptr<update_builder<T, Space>> col_update;
  if (!shared) col_update = std::make_unique<update_builder<T, Space>>(H, l, k, Wcol);
  const auto& u = row_update.ranks();
  std::vector<int> r = H.rank;
  for (int lc = l; lc <= L; ++lc) r[lc] += u[lc];
  auto under_update = [&](int level, int a, int b) {
    const int sa = a >> (level - l), sb = b >> (level - l);
    return sa != sb && (sa ^ 1) == sb && used[sa];
  };
  // Coupling, from the leaves up (each level's R factors replace the ones below).
  for (int lc = L; lc >= l; --lc) {
    const auto& Rr = row_update.level(lc);
    const auto& Rc = shared ? Rr : col_update->level(lc);
    const auto& lv = mt.coupling[lc];
    const int kc = H.rank[lc], rc = r[lc], uc = u[lc], count = lv.blocks();
    buffer<T, Space> S(ctx, std::size_t(count) * rc * rc);
    fill(*ctx, S.data(), S.size(), T(0));
    std::vector<std::int64_t> o_old(count), o_new(count);
    batch<const T, Space> ra(ctx), rb(ctx);  // R_t and R_s of the blocks under the update ...
    batch<T, Space> at(ctx);                  // ... and the corner of S they write (rows and columns past kc)
    for (int t = 0; t < lv.level_size(); ++t)
      for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) {
        o_old[b] = std::int64_t(b) * kc * kc, o_new[b] = std::int64_t(b) * rc * rc;
        if (under_update(lc, t, lv.col[b]) && uc > 0) {
          ra.add(Rr.data() + std::int64_t(t) * uc * k, uc, k, uc);
          rb.add(Rc.data() + std::int64_t(lv.col[b]) * uc * k, uc, k, uc);
          at.add(S.data() + o_new[b] + kc + std::int64_t(kc) * rc, uc, uc, rc);
        }
      }
    copy_blocks(ctx, kc, kc, H.coupling[lc].data(), o_old, kc, S.data(), o_new, rc);
    gemm(op::none, op::transpose, T(1), ra, rb, T(0), at);
    H.coupling[lc] = std::move(S);
  }
  auto row = std::make_shared<basis_tree<T, Space>>(extended_basis(H, *H.row_basis, l, row_update.result(), r));
  auto col = shared ? row
                    : std::make_shared<basis_tree<T, Space>>(extended_basis(H, *H.col_basis, l, col_update->result(), r));
  // Dense leaves under the update: D_ab += Wrow|_a Wcol|_b^T, read from the explicit columns.
  const auto& dn = mt.dense;
  batch<const T, Space> wa(ctx), wb(ctx);
  batch<T, Space> dab(ctx);
  auto leaf_rows = [&](int a) {
    const int t = a >> (L - l), j = a - (t << (L - l));
    return std::int64_t(t) * P * k + std::int64_t(j) * m;
  };
  for (int a = 0; a < dn.level_size() && k > 0; ++a)
    for (int e = dn.row_ptr[a]; e < dn.row_ptr[a + 1]; ++e)
      if (under_update(L, a, dn.col[e])) {
        wa.add(Wrow + leaf_rows(a), m, k, P), wb.add(Wcol + leaf_rows(dn.col[e]), m, k, P);
        dab.add(H.dense.data() + std::int64_t(e) * m * m, m, m, m);
      }
  gemm(op::none, op::transpose, T(1), wa, wb, T(1), dab);
  H.row_basis = row, H.col_basis = col, H.rank = r;
}

}  // namespace h2expr::detail
