#pragma once
// Algebraic compression of H2 matrices (section 5 of the H2 GPU paper), written once for every space:
//   1. orthogonalize the bases (orthogonalize.hpp);
//   2. basis generation, a downsweep of batched QR: the weight Z_t of node t (Z_t Z_t^T = the Gram
//      matrix of everything U_t carries) is the R factor of [Z_parent^T E_t^T; S_ts1^T; S_ts2^T; ...];
//   3. truncation: P_t = the leading left singular vectors of Z_t, kept while sigma > tol ||A||_2;
//      new leaves U_t P_t, new transfers P_c^T E_c P_p;
//   4. projection of the coupling matrices, P_t^T S_ts P_s (transform_coupling).
// Ranks come out uniform per level (the largest node rank; smaller nodes get zero columns); compress()
// then stores every node at its own rank (compact.hpp).
#include <h2expr/detail/hgemv.hpp>
#include <h2expr/detail/items.hpp>
#include <h2expr/detail/orthogonalize.hpp>
#include <h2expr/matrix.hpp>

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
  return std::is_same_v<Space, host> ? std::size_t(32) << 20 : std::size_t(1) << 30;
}

// Weights of a basis, per level: R_t with Z_t = R_t^T (rank x rank per node). A row basis carries the
// blocks of row t (S_ts^T in the stack), a column basis those of column t (S_st); a basis shared by
// rows and columns carries both, so it stays valid for a non-symmetric operator (recompress passes
// the rows alone for a symmetric one).
template <class T, class Space>
std::vector<buffer<T, Space>> basis_weights(h2_data<T, Space>& A, const basis_tree<T, Space>& B, bool rows, bool cols) {
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
    std::vector<int> height(nodes);
    for (int t = 0; t < nodes; ++t) height[t] = kp + entries(t) * k;
    // The stacks of a level hold a transposed copy of its coupling blocks, padded to the tallest
    // stack: they are formed and factored a group of nodes at a time, in one reused buffer.
    // Groups are pairs of siblings, so the parent part stays one strided product per group.
    std::size_t per_node = 0;  // the tallest stack (an empty one is a zero row)
    for (int t = 0; t < nodes; ++t) per_node = std::max(per_node, std::size_t(std::max(height[t], 1)) * k);
    const int group = std::clamp(int(std::min<std::size_t>(weights_chunk_bytes<Space>() / (sizeof(T) * per_node), nodes)) & ~1,
                                 std::min(nodes, 2), nodes);
    buffer<T, Space> W(ctx, std::size_t(group) * per_node);
    for (int first = 0; first < nodes; first += group) {
      const int last = std::min(nodes, first + group), count = last - first;
      int H = 1;
      for (int t = first; t < last; ++t) H = std::max(H, height[t]);
      fill(*ctx, W.data(), std::size_t(count) * H * k, T(0));
      // Below the parent part: S_ts^T for the blocks of row t, then S_st for those of column t (copies).
      std::vector<item_copy> rows_part, cols_part;
      for (int t = first; t < last; ++t) {
        std::int64_t row = std::int64_t(t - first) * H * k + kp;
        if (rows)
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
      std::vector<int> m(count);
      for (int t = first; t < last; ++t) m[t - first] = std::max(height[t], 1);  // an empty node: one zero row, R = 0
      qr_items<T, Space>(ctx, W.data(), std::int64_t(H) * k, H, m, k, R[l].data() + std::int64_t(first) * k * k,
                         /*form_q=*/false);
      ctx->synchronize();  // the copy lists and W's next use wait for this group
    }
  }
  return R;
}

// Truncation bases per level: P_t (rank x new rank, zero columns past the node's own rank) from the
// SVD of the weights; `choose(l, sigma, k)` picks the node ranks of level l from the singular values
// (k per node, descending, nodes one after another); returns them through `node_ranks`.
template <class T, class Space, class Choose>
std::vector<buffer<T, Space>> truncation_bases(h2_data<T, Space>& A, std::vector<buffer<T, Space>>& R, Choose&& choose,
                                               std::vector<std::vector<int>>& node_ranks) {
  const auto& ctx = A.ctx;
  const int L = A.depth();
  std::vector<buffer<T, Space>> P(L + 1);
  node_ranks.assign(L + 1, {});
  for (int l = 0; l <= L; ++l) {
    const int k = A.rank[l], nodes = 1 << l;
    P[l] = buffer<T, Space>(ctx, std::size_t(nodes) * k * k);
    node_ranks[l].assign(nodes, 0);
    if (k == 0) continue;
    buffer<T, Space> S(ctx, std::size_t(nodes) * k);
    buffer<int, Space> M(ctx, std::vector<int>(nodes, k)), LD(ctx, std::vector<int>(nodes, k));
    buffer<T*, Space> pa(ctx, std::size_t(nodes)), ps(ctx, std::size_t(nodes)), pv(ctx, std::size_t(nodes));
    marshal_strided(*ctx, R[l].data(), std::int64_t(k) * k, nodes, pa.data());
    marshal_strided(*ctx, S.data(), std::int64_t(k), nodes, ps.data());
    marshal_strided(*ctx, P[l].data(), std::int64_t(k) * k, nodes, pv.data());
    // R_t = U S V^T, so Z_t = R_t^T = V S U^T: its left singular vectors are V. A chooser that
    // keeps exactly the values above a threshold needs no others exact (svd_right_vbatched).
    double resolve = 0;
    if constexpr (requires { choose.threshold(l); }) resolve = choose.threshold(l);
    svd_right_vbatched(*ctx, M.data(), M.data(), pa.data(), LD.data(), ps.data(), pv.data(), LD.data(), nodes, k, k,
                       resolve);
    node_ranks[l] = choose(l, S.to_host(), k);
    zero_trailing_columns<T, Space>(ctx, P[l].data(), std::int64_t(k) * k, k, k, k, node_ranks[l]);
  }
  return P;
}

// Node ranks that keep every singular value above eps (an absolute 2-norm threshold).
struct keep_above {
  double eps;
  double threshold(int) const { return eps; }
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
    ctx->synchronize();
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

// ||M||_2 by block Krylov (Rayleigh-Ritz on span{X, M^T M X, (M^T M)^2 X, ...}): the products run on
// the space, a block of vectors at a time (apply(op, x, y): y = op(M) x), which costs far less per
// vector than one at a time; the small recurrences run on the host in double, with full
// reorthogonalization. With V the orthonormal Krylov basis, the estimate is ||M V||_2, from the Gram
// matrix of the products M V_j already made: a lower bound (to rounding) at least as large as block
// power iteration's. X is the constant vector and block - 1 random ones: the kernel matrices H2 holds
// are dominated by a smooth, one-signed singular vector, which a random start meets only with weight
// ~1/sqrt(n) (it then cost a whole extra block). It stops when the value moves less than 0.3%
// (relative) or after max_steps blocks: compression's threshold needs no more, and a low value only
// tightens it (TARGETS.md's 2D problem: 3 blocks of 4, 2.4e-6 below the converged value).
template <class T, class Space, class Apply>
double krylov_two_norm(const context_ptr<Space>& ctx, index rows, index cols, Apply&& apply, std::uint64_t seed,
                       int max_steps, int block = 4) {
  using mat = Eigen::MatrixXd;
  if (rows == 0 || cols == 0) return 0;
  block = int(std::min<index>(block, cols));
  auto product = [&](op trans, const mat& in) {
    const matrix<T, Space> x(dense<T>(in.template cast<T>()), ctx);
    auto y = matrix<T, Space>::uninitialized(trans == op::none ? rows : cols, in.cols(), ctx);
    apply(trans, x, y);
    return mat(to_dense(y).template cast<double>());
  };
  // Orthonormal columns of w against basis and each other (twice: full reorthogonalization); columns
  // that vanish are dropped.
  auto orthonormalize = [](mat w, const mat& basis) {
    const double scale = w.cols() > 0 ? w.colwise().norm().maxCoeff() : 0;
    for (int pass = 0; pass < 2; ++pass)
      if (basis.cols() > 0) w -= basis * (basis.transpose() * w);
    mat q(w.rows(), 0);
    for (Eigen::Index j = 0; j < w.cols(); ++j) {
      Eigen::VectorXd v = w.col(j);
      for (int pass = 0; pass < 2; ++pass) v -= q * (q.transpose() * v);
      if (!(v.norm() > 1e-10 * scale)) continue;
      q.conservativeResize(Eigen::NoChange, q.cols() + 1);
      q.col(q.cols() - 1) = v / v.norm();
    }
    return q;
  };
  mat V(cols, 0), MV(rows, 0), G(0, 0);  // G = (M V)^T (M V), grown a block at a time
  mat X = to_dense(matrix<T, Space>::random(cols, block, seed, ctx)).template cast<double>();
  X.col(0).setOnes();
  mat Vj = orthonormalize(X, V);
  double sigma = 0;
  for (int step = 0; step < max_steps && Vj.cols() > 0; ++step) {
    const mat Wj = product(op::none, Vj);
    const Eigen::Index old = G.rows(), b = Wj.cols();
    G.conservativeResize(old + b, old + b);
    G.topRightCorner(old, b) = MV.transpose() * Wj;
    G.bottomLeftCorner(b, old) = G.topRightCorner(old, b).transpose();
    G.bottomRightCorner(b, b) = Wj.transpose() * Wj;
    V.conservativeResize(Eigen::NoChange, V.cols() + b);
    V.rightCols(b) = Vj;
    MV.conservativeResize(Eigen::NoChange, MV.cols() + b);
    MV.rightCols(b) = Wj;
    const double s = std::sqrt(std::max(0.0, symmetric_max_eigenvalue(G)));
    const bool settled = step >= 1 && std::abs(s - sigma) <= 3e-3 * s;
    sigma = s;
    if (settled || step + 1 == max_steps) break;
    Vj = orthonormalize(product(op::transpose, Wj), V);  // the next Krylov block, M^T M V_j
  }
  return sigma;
}

// ||A||_2 (HGEMV and its transpose).
template <class T, class Space>
double norm_estimate(const h2_data<T, Space>& A, int max_steps = 6) {
  return krylov_two_norm<T, Space>(
      A.ctx, A.structure.rows(), A.structure.cols(),
      [&](op trans, const matrix<T, Space>& x, matrix<T, Space>& y) {
        hgemv(A, trans, const_view<T, Space>(x.view()), y.view());
      },
      12345, max_steps);
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
                    const std::vector<int>& r, bool shared, bool both, compress_phases& ph) {
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
    for (int t = 0; t < 1 << l; ++t) {  // per basis: the blocks of row t (and of column t: both)
      const double rows_t = lv.row_ptr[t + 1] - lv.row_ptr[t], cols_t = lv.col_ptr[t + 1] - lv.col_ptr[t];
      const double height = op + (both ? rows_t + cols_t : rows_t) * ol;
      weights += 2 * op * ol * op + qr_flops(std::max(height, 1.0), ol);
      if (!shared) weights += 2 * op * ol * op + qr_flops(std::max(op + cols_t * ol, 1.0), ol);
      trunc += bases * right_singular_flops<Space>(ol);
    }
    if (l == L) trunc += bases * double(1 << L) * 2 * A.m_max * rl * ol;
    else trunc += bases * double(1 << (l + 1)) * (2 * o[l + 1] * rl * ol + 2 * r[l + 1] * rl * o[l + 1]);
  }
  ph.flops_orthogonalize += orth, ph.flops_weights += weights, ph.flops_truncation += trunc, ph.flops_projection += proj;
}

// The rank every node of every level keeps, per basis (cols == rows for shared bases).
struct kept_ranks {
  std::vector<std::vector<int>> rows, cols;
};

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
  auto apply = [&](op trans, const matrix<T, Space>& x, matrix<T, Space>& y) {
    hgemv(A, trans, const_view<T, Space>(x.view()), y.view());
    lend l(A, B);
    hgemv(B, trans, T(-1), const_view<T, Space>(x.view()), T(1), y.view());
  };
  return krylov_two_norm<T, Space>(A.ctx, A.structure.rows(), A.structure.cols(), apply, 777, max_steps);
}

// Steps 1-4 (step 1 only where a basis is not orthonormal already); `error`, when given, receives
// ||A_before - A_after||_2 (difference_norm) before the old representation is released (no copy of A:
// both exist at that point anyway).
template <class T, class Space, class Choose>
kept_ranks recompress(h2_data<T, Space>& d, Choose&& choose, compress_phases* phases = nullptr, double* error = nullptr) {
  require(!d.compact(), "recompress: pad() the matrix first");
  const std::vector<int> k_in = d.rank;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto lap = [&](double compress_phases::*slot) {
    d.ctx->synchronize();
    const auto now = clock::now();
    if (phases) phases->*slot += std::chrono::duration<double>(now - t0).count();
    t0 = now;
  };
  // Not again for bases orthogonalize() has just made orthonormal (the README's orthogonalize(A);
  // compress(A, tol) paid for it twice). compress's own output is not flagged: its nested transfers
  // are projections, orthonormal only to about the tolerance.
  if (!d.row_basis->orthonormal || !d.col_basis->orthonormal) orthogonalize(d);
  lap(&compress_phases::orthogonalize);
  const std::vector<int> k_orth = d.rank;

  // A shared basis carries the blocks of its row and of its column; for a symmetric matrix those are
  // transposes of each other and span the same space, so the rows alone give the weights (half the
  // stack: the peer's choice too; see weights_from_rows_alone).
  const bool shared = d.row_basis == d.col_basis, both = shared && !weights_from_rows_alone(d);
  auto Zr = basis_weights(d, *d.row_basis, true, both);
  std::vector<buffer<T, Space>> Zc;
  if (!shared) Zc = basis_weights(d, *d.col_basis, false, true);
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
  if (phases) compress_flops(d, k_in, k_orth, r, shared, both, *phases);
  return kept;
}

}  // namespace h2expr::detail
