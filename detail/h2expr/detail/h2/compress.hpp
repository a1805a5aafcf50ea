#pragma once
// Algebraic compression of H2 matrices (section 5 of the H2 GPU paper), written once for every space:
//   1. orthogonalize the bases (orthogonalize.hpp);
//   2. basis generation, a downsweep of batched QR: the weight Z_t of node t (Z_t Z_t^T = the Gram
//      matrix of everything U_t carries) is the R factor of [Z_parent^T E_t^T; S_ts1^T; S_ts2^T; ...]
//      (or, where the threshold allows, a square root of that stack's Gram matrix: gram_factor);
//   3. truncation: P_t = the leading left singular vectors of Z_t, kept while sigma > tol ||A||_2;
//      new leaves U_t P_t, new transfers P_c^T E_c P_p;
//   4. projection of the coupling matrices, P_t^T S_ts P_s (transform_coupling).
// Ranks come out uniform per level (the largest node rank; smaller nodes get zero columns); compress()
// then stores every node at its own rank (compact.hpp).
#include <h2expr/detail/h2/compact.hpp>
#include <h2expr/detail/h2/hgemv.hpp>
#include <h2expr/detail/primitives/items.hpp>
#include <h2expr/detail/h2/orthogonalize.hpp>
#include <h2expr/detail/operands/matrix.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace h2expr::detail {

template <class T, class Space>
buffer<T, Space> identity_buffer(const context_ptr<Space>& ctx, int k) {
  std::vector<T> id(std::size_t(k) * k, T(0));
  for (int i = 0; i < k; ++i) id[std::size_t(i) * k + i] = T(1);
  return buffer<T, Space>(ctx, id);
}

// Bytes of stacked weights formed at once: enough for full batches on the GPU, cache-sized on the host.
template <class Space>
constexpr std::size_t weights_chunk_bytes() {
  return space_traits<Space>::chunk_bytes(std::size_t(32) << 20);
}

// R_i (k x k) from the Gram matrices G_i = W_i^T W_i + C_i C_i^T of the stacks W_i (m_i x k at W + i H k,
// ld H) and the blocks C_i of `in_storage` (k x n_i at blocks + a, its item i with c = i k k):
// R_i = L_i^{-1} G_i with L_i L_i^T = G_i + shift I (Cholesky; `root_shift` is sqrt(shift) I), so that
// R_i^T R_i = G_i (G_i + shift I)^{-1} G_i: G_i less about `shift` on its large eigenvalues, and next to
// nothing on those under `shift`, which its rounding blurs anyway. G: scratch for count k x k blocks.
// False where a Cholesky factorization failed (R is then left for the QR).
template <class T, class Space>
bool gram_factor(const context_ptr<Space>& ctx, const T* W, int H, const std::vector<int>& m, int k,
                 const T* root_shift, T* G, T* R, const T* blocks, std::vector<item_gemm> in_storage) {
  const int count = int(m.size());
  std::vector<item_gemm> gram;
  std::vector<item_trsm> solve;
  std::vector<std::int64_t> at;
  for (int i = 0; i < count; ++i) {
    const std::int64_t w = std::int64_t(i) * H * k, g = std::int64_t(i) * k * k;
    gram.push_back({k, k, m[i], w, w, g, H, H, k});
    solve.push_back({k, k, g, g, k, k});
    at.push_back(g);
  }
  gemm_items(ctx, op::transpose, op::none, T(1), W, W, T(0), G, std::move(gram));
  gemm_items(ctx, op::none, op::transpose, T(1), blocks, blocks, T(1), G, std::move(in_storage));
  copy(*ctx, G, R, std::size_t(count) * k * k);
  gemm_strided_batched(*ctx, op::transpose, op::none, k, k, k, T(1), root_shift, k, 0, root_shift, k, 0, T(1), G, k,
                       std::int64_t(k) * k, count);
  if (potrf_items(ctx, G, at, std::vector<int>(count, k), k) >= 0) return false;
  trsm_items(ctx, side::left, uplo::lower, op::none, diag::non_unit, T(1), G, R, std::move(solve));
  return true;
}

// When the weights may come from Gram matrices: their rounding must stay far below the truncation
// threshold. `allowed` is the error an eigenvalue of Z_t Z_t^T may carry (0: never), `norm2` bounds
// ||Z_t||^2 (||A||_2^2).
struct gram_weights {
  double allowed = 0, norm2 = 0;
  // The diagonal shift that lets Cholesky factor the Gram matrix of a stack of `height` rows and k
  // columns, or 0 where it would exceed `allowed` (then Householder QR): the Gram's rounding is about
  // sqrt(height) u ||Z||^2 (a sum of height products) and Cholesky's k u ||Z||^2. What a shift takes
  // off (gram_factor) carries into the children through R_p, so the levels' shifts add up: `allowed`
  // is per level.
  template <class T>
  double shift(int height, int k) const {
    const double d = 2 * (std::sqrt(double(height)) + k) * double(std::numeric_limits<T>::epsilon()) * norm2;
    return d > 0 && d <= allowed ? d : 0;
  }
};

// Weights of a basis, per level: R_t with Z_t = R_t^T (rank x rank per node). A row basis carries the
// blocks of row t (S_ts^T in the stack), a column basis those of column t (S_st); a basis shared by
// rows and columns carries both, so it stays valid for a non-symmetric operator (recompress passes
// the rows alone for a symmetric one). R_t is the stack's R factor by Householder QR, or, where
// `gram` allows it for the level, a square root of the stack's Gram matrix less a shift
// (gram_factor): products at gemm speed instead of a QR of the whole stack (the host: 7x faster at
// 1,800 x 64), the same R^T R on the values that truncation keeps, to the shift (see gram_weights).
template <class T, class Space>
std::vector<buffer<T, Space>> basis_weights(h2_data<T, Space>& A, const basis_tree<T, Space>& B, bool rows, bool cols,
                                            const gram_weights& gram = {}) {
  const auto& ctx = A.ctx;
  const auto& blocks = A.structure.blocks();
  const int L = A.depth();
  std::vector<buffer<T, Space>> R(L + 1);
  for (int l = 0; l <= L; ++l) {
    const int k = A.rank[l], kp = l > 0 ? A.rank[l - 1] : 0, nodes = 1 << l;
    R[l] = buffer<T, Space>(ctx, std::size_t(nodes) * k * k);
    if (k == 0) continue;
    const auto& lv = blocks.coupling[l];
    auto entries = [&](int t) { return (rows ? lv.row_ptr[t + 1] - lv.row_ptr[t] : 0) + (cols ? lv.col_ptr[t + 1] - lv.col_ptr[t] : 0); };
    int tallest = 0;
    for (int t = 0; t < nodes; ++t) tallest = std::max(tallest, kp + entries(t) * k);
    // By Gram (gram_factor), a row basis's blocks need no copy: those of row t lie side by side in
    // storage, [S_ts1 S_ts2 ...] (k x entries k), and their product goes into the Gram matrix directly.
    const double shift = gram.template shift<T>(tallest, k);
    const bool side_by_side = shift > 0 && !cols;
    buffer<T, Space> root_shift, G;
    if (shift > 0) {
      std::vector<T> d(std::size_t(k) * k, T(0));
      for (int i = 0; i < k; ++i) d[std::size_t(i) * k + i] = T(std::sqrt(shift));
      root_shift = buffer<T, Space>(ctx, d);
    }
    // The stacks of a level hold a transposed copy of its coupling blocks, padded to the tallest
    // stack: they are formed and factored a group of nodes at a time, in one reused buffer.
    // Groups are pairs of siblings, so the parent part stays one strided product per group.
    const std::size_t per_node = std::size_t(std::max(tallest, 1)) * k;  // an empty stack: a zero row
    const int group = std::clamp(int(std::min<std::size_t>(weights_chunk_bytes<Space>() / (sizeof(T) * per_node), nodes)) & ~1,
                                 std::min(nodes, 2), nodes);
    buffer<T, Space> W(ctx, std::size_t(group) * per_node);
    if (shift > 0) G = buffer<T, Space>(ctx, std::size_t(group) * k * k);
    for (int first = 0; first < nodes; first += group) {
      const int last = std::min(nodes, first + group), count = last - first;
      T* out = R[l].data() + std::int64_t(first) * k * k;
      std::vector<int> m(count);
      // Forms the stacks of the group in W (their heights in m) and returns their leading dimension.
      auto stack = [&](bool blocks_in_storage) {
        int H = 1;
        for (int t = first; t < last; ++t) {
          m[t - first] = kp + (blocks_in_storage ? 0 : entries(t) * k);
          H = std::max(H, m[t - first]);
        }
        fill(*ctx, W.data(), std::size_t(count) * H * k, T(0));
        // Below the parent part: S_ts^T for the blocks of row t, then S_st for those of column t (copies).
        std::vector<item_copy> rows_part, cols_part;
        for (int t = first; t < last; ++t) {
          std::int64_t row = std::int64_t(t - first) * H * k + kp;
          if (rows && !blocks_in_storage)
            for (int e = lv.row_ptr[t]; e < lv.row_ptr[t + 1]; ++e, row += k)
              rows_part.push_back({k, k, std::int64_t(e) * k * k, row, k, H});
          if (cols)
            for (int e = lv.col_ptr[t]; e < lv.col_ptr[t + 1]; ++e, row += k)
              cols_part.push_back({k, k, std::int64_t(lv.block_of[e]) * k * k, row, k, H});
        }
        copy_items(ctx, A.coupling[l].data(), W.data(), std::move(rows_part), op::transpose);
        copy_items(ctx, A.coupling[l].data(), W.data(), std::move(cols_part));
        // Parent part: Z_p^T E_t^T = R_p E_t^T, for child h of every parent of the group.
        if (kp > 0)
          for (int h = 0; h < 2; ++h)
            gemm_strided_batched(*ctx, op::none, op::transpose, kp, k, kp, T(1),
                                 R[l - 1].data() + std::int64_t(first / 2) * kp * kp, kp, std::int64_t(kp) * kp,
                                 B.transfers[l].data() + std::int64_t(first / 2) * 2 * k * kp + h * k, 2 * k,
                                 std::int64_t(2) * k * kp, T(0), W.data() + std::int64_t(h) * H * k, H,
                                 std::int64_t(2) * H * k, count / 2);
        for (int& rows_t : m) rows_t = std::max(rows_t, 1);  // an empty stack: one zero row, R = 0
        return H;
      };
      bool factored = false;
      if (shift > 0) {
        const int H = stack(side_by_side);
        std::vector<item_gemm> in_storage;
        if (side_by_side)
          for (int t = first; t < last; ++t) {
            const std::int64_t e = lv.row_ptr[t];
            if (entries(t) > 0) in_storage.push_back({k, k, entries(t) * k, e * k * k, e * k * k, std::int64_t(t - first) * k * k, k, k, k});
          }
        factored = gram_factor(ctx, W.data(), H, m, k, root_shift.data(), G.data(), out, A.coupling[l].data(),
                               std::move(in_storage));
      }
      if (!factored) {
        const int H = stack(false);
        qr_strided<T, Space>(ctx, W.data(), std::int64_t(H) * k, H, m, k, out, k, /*form_q=*/false);
      }
    }
  }
  return R;
}

// Truncation bases per level: P_t (rank x new rank, zero columns past the node's own rank) from the
// SVD of the weights; `choose(l, sigma, k)` picks the node ranks of level l from the singular values
// (k per node, descending, nodes one after another); returns them through `node_ranks`.
// The weights' singular values (k per node, descending, into sigma) and right singular vectors (k x k per
// node, R: count k x k weights, overwritten): the truncation bases before the chooser picks their ranks.
// resolve: see svd_right_vbatched.
template <class T, class Space>
buffer<T, Space> node_svd(const context_ptr<Space>& ctx, buffer<T, Space>& R, int count, int k, double resolve,
                          std::vector<T>& sigma) {
  buffer<T, Space> P(ctx, std::size_t(count) * k * k);
  sigma.clear();
  if (count == 0 || k == 0) return P;
  buffer<T, Space> S(ctx, std::size_t(count) * k);
  const std::int64_t kk = std::int64_t(k) * k;
  svd_right(batch<T, Space>(ctx, R.data(), kk, count, k, k, k), batch<T, Space>(ctx, S.data(), k, count, k, 1, k),
            batch<T, Space>(ctx, P.data(), kk, count, k, k, k), resolve);
  sigma = S.to_host();
  return P;
}

template <class T, class Space, class Choose>
std::vector<buffer<T, Space>> truncation_bases(h2_data<T, Space>& A, std::vector<buffer<T, Space>>& R, Choose&& choose,
                                               std::vector<std::vector<int>>& node_ranks) {
  const auto& ctx = A.ctx;
  const int L = A.depth();
  std::vector<buffer<T, Space>> P(L + 1);
  node_ranks.assign(L + 1, {});
  for (int l = 0; l <= L; ++l) {
    const int k = A.rank[l], nodes = 1 << l;
    node_ranks[l].assign(nodes, 0);
    // R_t = U S V^T, so Z_t = R_t^T = V S U^T: its left singular vectors are V. A chooser that
    // keeps exactly the values above a threshold needs no others exact (svd_right_vbatched).
    double resolve = 0;
    if constexpr (requires { choose.threshold(l); }) resolve = choose.threshold(l);
    std::vector<T> sigma;
    P[l] = node_svd(ctx, R[l], nodes, k, resolve, sigma);
    if (k == 0) continue;
    node_ranks[l] = choose(l, sigma, k);
    zero_trailing_columns<T, Space>(ctx, P[l].data(), std::int64_t(k) * k, k, k, k, node_ranks[l]);
  }
  return P;
}

// Node ranks that keep every singular value above eps (an absolute 2-norm threshold). With norm, an
// estimate of ||A||_2 (or 0), the weights may come from Gram matrices (gram_weights): each of the
// depth + 1 levels may shift the squared values by 1/16 of eps^2 / (depth + 1), a value at the
// threshold by under 3% of itself.
struct keep_above {
  double eps, norm = 0;
  double threshold(int) const { return eps; }
  gram_weights gram(int depth) const { return {eps * eps / 16 / (depth + 1), norm * norm}; }
  template <class T>
  std::vector<int> operator()(int, const std::vector<T>& sigma, int k) const {
    std::vector<int> r(sigma.size() / std::size_t(std::max(k, 1)), 0);
    for (std::size_t t = 0; t < r.size(); ++t)
      while (r[t] < k && double(sigma[t * k + r[t]]) > eps) ++r[t];
    return r;
  }
};

// The new basis tree: leaves U_t P_t, transfers P_c^T E_c P_p, with ranks r (per level).
template <class T, class Space>
basis_tree<T, Space> truncated_basis(h2_data<T, Space>& A, const basis_tree<T, Space>& B,
                                     const std::vector<buffer<T, Space>>& P, const std::vector<int>& r) {
  const auto& ctx = A.ctx;
  const int L = A.depth(), m = A.m_max, leaves = 1 << L;
  basis_tree<T, Space> N;
  N.leaves = buffer<T, Space>(ctx, std::size_t(leaves) * m * r[L]);
  if (r[L] > 0)
    gemm_strided_batched(*ctx, op::none, op::none, m, r[L], A.rank[L], T(1), B.leaves.data(), m,
                         std::int64_t(m) * A.rank[L], P[L].data(), A.rank[L], std::int64_t(A.rank[L]) * A.rank[L], T(0),
                         N.leaves.data(), m, std::int64_t(m) * r[L], leaves);
  N.transfers.resize(L + 1);
  for (int l = 1; l <= L; ++l) {
    const int k = A.rank[l], kp = A.rank[l - 1], rc = r[l], rp = r[l - 1], parents = 1 << (l - 1);
    N.transfers[l] = buffer<T, Space>(ctx, std::size_t(parents) * 2 * rc * rp);
    if (rc == 0 || rp == 0) continue;
    buffer<T, Space> tmp(ctx, std::size_t(parents) * 2 * k * rp);
    for (int h = 0; h < 2; ++h) {
      gemm_strided_batched(*ctx, op::none, op::none, k, rp, kp, T(1), B.transfers[l].data() + h * k, 2 * k,
                           std::int64_t(2) * k * kp, P[l - 1].data(), kp, std::int64_t(kp) * kp, T(0),
                           tmp.data() + h * k, 2 * k, std::int64_t(2) * k * rp, parents);
      gemm_strided_batched(*ctx, op::transpose, op::none, rc, rp, k, T(1), P[l].data() + std::int64_t(h) * k * k, k,
                           std::int64_t(2) * k * k, tmp.data() + h * k, 2 * k, std::int64_t(2) * k * rp, T(0),
                           N.transfers[l].data() + h * rc, 2 * rc, std::int64_t(2) * rc * rp, parents);
    }
  }
  return N;
}

// The largest eigenvalue of a small symmetric matrix, by cyclic Jacobi rotations (a few lines
// instead of an eigensolver in every translation unit that compresses; converges quadratically).
inline double symmetric_max_eigenvalue(Eigen::MatrixXd a) {
  const Eigen::Index k = a.rows();
  if (k == 0) return 0;
  for (int sweep = 0; sweep < 60; ++sweep) {
    double off = 0;
    for (Eigen::Index p = 0; p < k; ++p)
      for (Eigen::Index q = p + 1; q < k; ++q) off += a(p, q) * a(p, q);
    if (off <= 1e-30 * a.diagonal().squaredNorm()) break;
    for (Eigen::Index p = 0; p < k; ++p)
      for (Eigen::Index q = p + 1; q < k; ++q) {
        if (a(p, q) == 0) continue;
        const double theta = (a(q, q) - a(p, p)) / (2 * a(p, q));
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), sn = t * c;
        for (Eigen::Index i = 0; i < k; ++i) {  // a := J^T a J, J the rotation in the (p, q) plane
          const double ip = a(i, p), iq = a(i, q);
          a(i, p) = c * ip - sn * iq, a(i, q) = sn * ip + c * iq;
        }
        for (Eigen::Index i = 0; i < k; ++i) {
          const double pi = a(p, i), qi = a(q, i);
          a(p, i) = c * pi - sn * qi, a(q, i) = sn * pi + c * qi;
        }
      }
  }
  return a.diagonal().maxCoeff();
}

// krylov_two_norm's vectors in one process.
struct local_vectors {
  index total(index n) const { return n; }
  template <class T, class Space>
  matrix<T, Space> random(const context_ptr<Space>& ctx, index rows, int cols, std::uint64_t seed) const {
    return matrix<T, Space>::random(rows, cols, seed, ctx);
  }
  template <class T, class Space>
  void sum(view<T, Space>) const {}
};

// ||M||_2 by block Krylov (Rayleigh-Ritz on span{X, M^T M X, (M^T M)^2 X, ...}), a block of vectors at
// a time (apply(op, x, y): y = op(M) x, on views), which costs far less per vector than one at a time.
// Every n-sized array stays on the space: the orthonormal Krylov basis V, the products M V, their Gram
// matrix and the orthonormalization (block Gram-Schmidt twice, then Cholesky QR twice, vanishing
// columns dropped) are gemms there; only matrices of the Krylov basis's size come to the host (in
// double). The estimate is ||M V||_2, from the Gram matrix of the products M V_j already made: a lower
// bound (to rounding) at least as large as block power iteration's. X is the constant vector and
// block - 1 random ones: the kernel matrices H2 holds are dominated by a smooth, one-signed singular
// vector, which a random start meets only with weight ~1/sqrt(n) (it then cost a whole extra block).
// It stops when the value's increases say it is within about 0.3% (see `settled`) or after max_steps
// blocks: compression's threshold needs no more, and a low value only tightens it. For a symmetric M the
// Krylov space is M's own, span{X, M X, M^2 X, ...}: one product per block instead of two, for a space
// at least as large per product (it holds the M^T M space of half the products). TARGETS.md's 2D
// problem: 3 products of 4 vectors, 1.2e-4 below the converged value (it took 6 products with M^T M).
// The vectors are this process's (local_vectors) or, for a distributed operator, each rank's rows of
// them (distributed/norm.hpp): `vectors` makes the start and sums the inner products over the ranks.
template <class T, class Space, class Apply, class Vectors = local_vectors>
double krylov_two_norm(const context_ptr<Space>& ctx, index rows, index cols, Apply&& apply, std::uint64_t seed,
                       int max_steps, bool symmetric = false, int block = 4, const Vectors& vectors = {}) {
  using mat = Eigen::MatrixXd;
  if (vectors.total(rows) == 0 || vectors.total(cols) == 0 || max_steps <= 0) return 0;
  block = int(std::min<index>(block, vectors.total(cols)));
  const int cap = (max_steps + 1) * block;  // V's columns: the blocks kept, and room for the next
  auto V = matrix<T, Space>::uninitialized(cols, cap, ctx), MV = matrix<T, Space>::uninitialized(rows, cap, ctx);
  auto Z = matrix<T, Space>::uninitialized(cols, block, ctx), C = matrix<T, Space>::uninitialized(cap, block, ctx);
  auto gemm = [&](op ta, op tb, T alpha, const_view<T, Space> a, const_view<T, Space> b, T beta, view<T, Space> c) {
    const index k = ta == op::none ? a.cols() : a.rows();
    if (c.rows() > 0 && c.cols() > 0 && k > 0)
      gemm_strided_batched(*ctx, ta, tb, int(c.rows()), int(c.cols()), int(k), alpha, a.data(), int(a.ld()), 0,
                           b.data(), int(b.ld()), 0, beta, c.data(), int(c.ld()), 0, 1);
    else if (beta == T(0))  // no rows here (a rank without rows of a distributed operator)
      for (index j = 0; j < c.cols(); ++j) fill(*ctx, c.data() + j * c.ld(), std::size_t(c.rows()), T(0));
    if (ta == op::transpose) vectors.sum(c);  // inner products: over every rank's rows
  };
  auto small = [&](const_view<T, Space> v) { return mat(to_dense(v).template cast<double>()); };
  auto copy_columns = [&](const_view<T, Space> from, view<T, Space> to) {
    copy_2d(*ctx, std::size_t(from.rows()), std::size_t(from.cols()), from.data(), std::size_t(from.ld()), to.data(),
            std::size_t(to.ld()));
  };
  // V's columns nv .. nv + b - 1 made orthonormal against its first nv and each other, in place; returns
  // how many are left. A column is dropped where it vanishes against V (below 1e-10, or 100 u, of the
  // block's largest) or where what is new in it against the block's columns before it falls below
  // 10 sqrt(u) of its norm: Cholesky QR twice is orthonormal to rounding only while the block's
  // condition stays under about 1 / sqrt(u), which Krylov blocks, converging together, exceed.
  auto orthonormalize = [&](int nv, int b) {
    const double u = double(std::numeric_limits<T>::epsilon()), vanish = std::max(1e-10, 100 * u),
                 drop = 10 * std::sqrt(u);
    gemm(op::transpose, op::none, T(1), V.columns(nv, b), V.columns(nv, b), T(0), C.block(0, 0, b, b));
    const double scale2 = small(C.block(0, 0, b, b)).diagonal().maxCoeff();
    for (int pass = 0; pass < 2 && nv > 0; ++pass) {
      gemm(op::transpose, op::none, T(1), V.columns(0, nv), V.columns(nv, b), T(0), C.block(0, 0, nv, b));
      gemm(op::none, op::none, T(-1), V.columns(0, nv), C.block(0, 0, nv, b), T(1), V.columns(nv, b));
    }
    for (int pass = 0; pass < 2 && b > 0; ++pass) {
      gemm(op::transpose, op::none, T(1), V.columns(nv, b), V.columns(nv, b), T(0), C.block(0, 0, b, b));
      mat g = small(C.block(0, 0, b, b)), w(b, b);
      for (int j = 0; j < b && pass == 0; ++j)  // (the second pass sees unit columns)
        if (!(g(j, j) > vanish * vanish * scale2)) g.row(j).setZero(), g.col(j).setZero();
      Eigen::VectorXd d(b);
      if (cholqr_factor_item<double>(b, g.data(), b, w.data(), b, d.data(), nullptr, drop) != 0) return 0;  // not finite
      int kept = 0;
      while (kept < b && d(kept) > 0) ++kept;
      if (kept > 0) {
        const matrix<T, Space> W(dense<T>(w.topLeftCorner(b, kept).template cast<T>()), ctx);
        gemm(op::none, op::none, T(1), V.columns(nv, b), W.view(), T(0), Z.columns(0, kept));
        copy_columns(Z.columns(0, kept), V.columns(nv, kept));
      }
      b = kept;
    }
    return b;
  };
  {
    auto X = vectors.template random<T, Space>(ctx, cols, block, seed);
    fill(*ctx, X.data(), std::size_t(cols), T(1));  // column 0: the constant vector
    copy_columns(X.view(), V.columns(0, block));
  }
  int nv = 0, bj = orthonormalize(0, block);
  mat G(0, 0);  // (M V)^T (M V), grown a block at a time
  double sigma = 0, rise = 0;  // the last value and its last increase
  for (int step = 0; step < max_steps && bj > 0; ++step) {
    apply(op::none, const_view<T, Space>(V.columns(nv, bj)), MV.columns(nv, bj));
    gemm(op::transpose, op::none, T(1), MV.columns(0, nv + bj), MV.columns(nv, bj), T(0), C.block(0, 0, nv + bj, bj));
    const mat c = small(C.block(0, 0, nv + bj, bj));
    G.conservativeResize(nv + bj, nv + bj);
    G.topRightCorner(nv, bj) = c.topRows(nv);
    G.bottomLeftCorner(bj, nv) = c.topRows(nv).transpose();
    G.bottomRightCorner(bj, bj) = (c.bottomRows(bj) + c.bottomRows(bj).transpose()) / 2;
    nv += bj;
    const double s = std::sqrt(std::max(0.0, symmetric_max_eigenvalue(G)));
    // Settled when the value moved less than 0.3%, or when its increases shrink fast (by a factor
    // rho < 1/2) and what they still add up to, rise rho / (1 - rho), is under 0.3%.
    const double next = std::abs(s - sigma), rho = rise > 0 ? next / rise : 1;
    const bool settled = step >= 1 && (next <= 3e-3 * s || (step >= 2 && rho < 0.5 && next * rho / (1 - rho) <= 3e-3 * s));
    sigma = s, rise = next;
    if (settled || step + 1 == max_steps) break;
    // The next block, M V_j (symmetric) or M^T M V_j, into V's columns from nv.
    if (symmetric) copy_columns(MV.columns(nv - bj, bj), V.columns(nv, bj));
    else apply(op::transpose, const_view<T, Space>(MV.columns(nv - bj, bj)), V.columns(nv, bj));
    bj = orthonormalize(nv, bj);
  }
  return sigma;
}

// ||A||_2 (HGEMV and its transpose), in at most 2 max_steps products of a block of vectors.
template <class T, class Space>
double norm_estimate(const h2_data<T, Space>& A, int max_steps = 6) {
  const bool symmetric = A.symmetric && A.structure.rows() == A.structure.cols();
  return krylov_two_norm<T, Space>(
      A.ctx, A.structure.rows(), A.structure.cols(),
      [&](op trans, const_view<T, Space> x, view<T, Space> y) { hgemv(A, trans, x, y); },
      12345, symmetric ? 2 * max_steps : max_steps, symmetric);
}

// Whether recompress weighs a basis by its rows alone: a symmetric matrix's shared basis. Its weights
// then hold half the squared mass the basis carries (its columns hold the same blocks, transposed),
// which a chooser that budgets discarded mass must allow for.
template <class T, class Space>
bool weights_from_rows_alone(const h2_data<T, Space>& d) {
  return d.row_basis == d.col_basis && d.symmetric;
}

// Seconds per phase of a recompression.
struct compress_phases {
  double orthogonalize = 0, weights = 0, truncation = 0, projection = 0;
  // Nominal floating-point operations per phase (compress_flops), for rates.
  double flops_orthogonalize = 0, flops_weights = 0, flops_truncation = 0, flops_projection = 0;
};

// Nominal work of svd_right_vbatched on one n x n weight: on the host a Gram matrix (n^3, symmetric)
// and a symmetric eigensolver with vectors (9n^3, Golub and Van Loan; further Gram rounds, on fewer
// directions, not counted); elsewhere an SVD with both vector sets (22n^3).
template <class Space>
double right_singular_flops(double n) {
  return (std::is_same_v<Space, host> ? 10.0 : 22.0) * n * n * n;
}

// Householder QR of m x n: 2mnp - (m + n)p^2 + 2p^3/3 with p = min(m, n) (R alone; Q costs as much).
inline double qr_flops(double m, double n) {
  const double p = std::min(m, n);
  return 2 * m * n * p - (m + n) * p * p + 2 * p * p * p / 3;
}

// The nominal work of recompress() on the uniform layouts, phase by phase, from the ranks before (k),
// after orthogonalization (o) and after truncation (r): gemm 2mnk, QR as qr_flops (twice with Q),
// the weights' singular pairs as right_singular_flops. The identity products
// that stack the coupling blocks into the weights are copies and not counted.
template <class T, class Space>
void compress_flops(const h2_data<T, Space>& A, const std::vector<int>& k, const std::vector<int>& o,
                    const std::vector<int>& r, bool shared, bool both, const gram_weights& gram, compress_phases& ph) {
  const auto& tree = A.structure.row_tree();
  const auto& blocks = A.structure.blocks();
  const int L = A.depth(), bases = shared ? 1 : 2;
  double orth = 0, weights = 0, trunc = 0, proj = 0;
  for (int t = 0; t < 1 << L; ++t) orth += 2 * qr_flops(tree.size(cluster_tree::level_begin(L) + t), k[L]);
  for (int l = L; l >= 1; --l)
    orth += (1 << (l - 1)) * (2 * 2.0 * o[l] * k[l - 1] * k[l] + 2 * qr_flops(2.0 * o[l], k[l - 1]));
  orth *= bases;
  for (int l = 0; l <= L; ++l) {
    const auto& lv = blocks.coupling[l];
    const double b = lv.blocks(), kl = k[l], ol = o[l], rl = r[l], op = l > 0 ? o[l - 1] : 0;
    orth += b * (2 * ol * kl * kl + 2 * ol * ol * kl);
    proj += b * (2 * rl * ol * ol + 2 * rl * rl * ol);
    // Per basis: the blocks of row t (and of column t: both); the column basis of a pair its columns'.
    // A stack's R costs a QR, or by Gram (gram_factor) its product, the shift, a Cholesky factorization
    // and a triangular solve.
    auto height = [&](int t, bool row_blocks, bool col_blocks) {
      return op + ((row_blocks ? lv.row_ptr[t + 1] - lv.row_ptr[t] : 0) +
                   (col_blocks ? lv.col_ptr[t + 1] - lv.col_ptr[t] : 0)) * ol;
    };
    auto stacks = [&](bool row_blocks, bool col_blocks) {
      double tallest = 0, work = 0;
      for (int t = 0; t < 1 << l; ++t) tallest = std::max(tallest, height(t, row_blocks, col_blocks));
      const bool by_gram = gram.template shift<T>(int(tallest), int(ol)) > 0;
      for (int t = 0; t < 1 << l; ++t) {
        const double h = height(t, row_blocks, col_blocks);
        work += 2 * op * ol * op + (by_gram ? 2 * h * ol * ol + 10 * ol * ol * ol / 3 : qr_flops(std::max(h, 1.0), ol));
      }
      return work;
    };
    weights += stacks(true, both) + (shared ? 0.0 : stacks(false, true));
    trunc += bases * double(1 << l) * right_singular_flops<Space>(ol);
    if (l == L) trunc += bases * double(1 << L) * 2 * A.m_max * rl * ol;
    else trunc += bases * double(1 << (l + 1)) * (2 * o[l + 1] * rl * ol + 2 * r[l + 1] * rl * o[l + 1]);
  }
  ph.flops_orthogonalize += orth, ph.flops_weights += weights, ph.flops_truncation += trunc, ph.flops_projection += proj;
}

// Steps 1-4 in place, on the uniform layout; `choose` picks the node ranks from the weights' singular
// values (see truncation_bases). Ranks become uniform per level at the largest node rank (zero
// columns past a node's own rank): compact() can then store the node ranks returned.
// ||A - B||_2 (krylov_two_norm), for two representations of one structure with the same dense
// leaves, which B does not hold (they cancel): A lends its own for B's products.
template <class T, class Space>
double difference_norm(h2_data<T, Space>& A, h2_data<T, Space>& B, int max_steps = 4) {
  struct lend {  // A's dense leaves in B while a product of B runs, back in A whatever happens
    h2_data<T, Space>&a, &b;
    lend(h2_data<T, Space>& a_, h2_data<T, Space>& b_) : a(a_), b(b_) { std::swap(a.dense, b.dense); }
    ~lend() { std::swap(a.dense, b.dense); }
  };
  auto apply = [&](op trans, const_view<T, Space> x, view<T, Space> y) {
    hgemv(A, trans, x, y);
    lend l(A, B);
    hgemv(B, trans, T(-1), x, T(1), y);
  };
  return krylov_two_norm<T, Space>(A.ctx, A.structure.rows(), A.structure.cols(), apply, 777, max_steps);
}

// Steps 1-4 (step 1 only where a basis is not orthonormal already); `error`, when given, receives
// ||A_before - A_after||_2 (difference_norm) before the old representation is released (no copy of A:
// both exist at that point anyway). `own`: the node ranks of a compact matrix that pad() has just made
// uniform (for orthogonalize), null otherwise: on_uniform_layout's.
template <class T, class Space, class Choose>
kept_ranks recompress(h2_data<T, Space>& d, Choose&& choose, compress_phases* phases = nullptr, double* error = nullptr,
                      kept_ranks* own = nullptr) {
  require(!d.compact(), "recompress: pad() the matrix first");
  const std::vector<int> k_in = d.rank;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto lap = [&](double compress_phases::*slot) {  // (only when asked: timing waits for the stream)
    if (!phases) return;
    phases->*slot += seconds_since(*d.ctx, t0);
    t0 = clock::now();
  };
  // Not again for bases orthogonalize() has just made orthonormal (the README's orthogonalize(A);
  // compress(A, tol) paid for it twice). compress's own output is not flagged: its nested transfers
  // are projections, orthonormal only to about the tolerance.
  if (!d.row_basis->orthonormal || !d.col_basis->orthonormal) orthogonalize(d, own ? &own->rows : nullptr, own ? &own->cols : nullptr);
  lap(&compress_phases::orthogonalize);
  const std::vector<int> k_orth = d.rank;

  // A shared basis carries the blocks of its row and of its column; for a symmetric matrix those are
  // transposes of each other and span the same space, so the rows alone give the weights (half the
  // stack: the peer's choice too; see weights_from_rows_alone).
  const bool shared = d.row_basis == d.col_basis, both = shared && !weights_from_rows_alone(d);
  gram_weights gram;
  if constexpr (requires { choose.gram(0); }) gram = choose.gram(d.depth());
  auto Zr = basis_weights(d, *d.row_basis, true, both, gram);
  std::vector<buffer<T, Space>> Zc;
  if (!shared) Zc = basis_weights(d, *d.col_basis, false, true, gram);
  lap(&compress_phases::weights);

  kept_ranks kept;
  auto Pr = truncation_bases(d, Zr, choose, kept.rows);
  std::vector<buffer<T, Space>> Pc;
  if (!shared) Pc = truncation_bases(d, Zc, choose, kept.cols);
  else kept.cols = kept.rows;
  const int L = d.depth();
  std::vector<int> r(L + 1, 0);
  for (int l = 0; l <= L; ++l)
    for (const auto* level : {&kept.rows[l], &kept.cols[l]})
      for (int v : *level) r[l] = std::max(r[l], v);
  auto row = std::make_shared<basis_tree<T, Space>>(truncated_basis(d, *d.row_basis, Pr, r));
  auto col = shared ? row : std::make_shared<basis_tree<T, Space>>(truncated_basis(d, *d.col_basis, Pc, r));
  lap(&compress_phases::truncation);

  h2_data<T, Space> cut;  // the truncated representation, without dense leaves
  cut.ctx = d.ctx, cut.structure = d.structure, cut.m_max = d.m_max, cut.rank = r, cut.arrays = d.arrays;
  cut.row_basis = row, cut.col_basis = col;
  cut.coupling = transform_coupling(d, Pr, op::transpose, shared ? Pr : Pc, op::none, r);
  lap(&compress_phases::projection);
  if (error) *error = difference_norm(d, cut);
  d.row_basis = row, d.col_basis = col, d.rank = r, d.coupling = std::move(cut.coupling);
  t0 = clock::now();
  if (phases) compress_flops(d, k_in, k_orth, r, shared, both, gram, *phases);
  return kept;
}

}  // namespace h2expr::detail
