#pragma once
// One level of the one-sample-set construction (hara_one_sample_set.hpp), shared by the single
// process's builder and the ranks' (distributed/hara.hpp): the near fields of a level's nodes; for each
// node t with Omega_N its near field's rows of the samples, G = Y_t Omega_N^+ and the samples of its far
// field, Y_t P with P in the null space of Omega_N, their SVD and the held-out estimate of every
// truncation; the rank that fits a node's share of the error budget.
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/splitmix.hpp>
#include <h2expr/detail/h2/orthogonalize.hpp>
#include <h2expr/detail/primitives/items.hpp>
#include <h2expr/detail/randomized/ara.hpp>
#include <h2expr/detail/structure/matrix_tree.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

namespace h2expr::detail {

// The near field of every node of a level, in CSR form: the partners (the node among them) whose block
// is not admissible at this level; mirror[e]: the index of pair e's transpose (the relation is
// symmetric: rows and columns share the tree).
struct near_field {
  std::vector<int> ptr, col, mirror;
  int pairs() const { return int(col.size()); }
  // Where each pair (t, s)'s block of rows[t] x cols[s] starts when packed in pair order (pairs + 1).
  std::vector<std::int64_t> packed(const std::vector<int>& rows, const std::vector<int>& cols) const {
    std::vector<std::int64_t> at(col.size() + 1, 0);
    for (int t = 0; t + 1 < int(ptr.size()); ++t)
      for (int e = ptr[t]; e < ptr[t + 1]; ++e) at[e + 1] = at[e] + std::int64_t(rows[t]) * cols[col[e]];
    return at;
  }
  int find(int t, int s) const {
    for (int e = ptr[t]; e < ptr[t + 1]; ++e)
      if (col[e] == s) return e;
    return -1;
  }
};

// near[l], l = 0..depth: the children of the parent's near field less the level's admissible blocks
// (the root is its own near field); at the leaves, the dense blocks in their order. Empty when the
// blocks do not nest so (not for the structures built here).
inline std::vector<near_field> near_fields(const matrix_tree& mt) {
  const int L = mt.depth();
  std::vector<near_field> nf(std::size_t(L) + 1);
  nf[0].ptr = {0, 1}, nf[0].col = {0};
  for (int l = 1; l <= L; ++l) {
    const auto& lv = mt.coupling[l];
    auto& f = nf[l];
    const int nodes = 1 << l;
    f.ptr.assign(1, 0);
    for (int t = 0; t < nodes; ++t) {
      const auto& up = nf[l - 1];
      for (int e = up.ptr[t / 2]; e < up.ptr[t / 2 + 1]; ++e)
        for (int c = 2 * up.col[e]; c < 2 * up.col[e] + 2; ++c) {
          const bool admissible = std::find(lv.col.begin() + lv.row_ptr[t], lv.col.begin() + lv.row_ptr[t + 1], c) !=
                                  lv.col.begin() + lv.row_ptr[t + 1];
          if (!admissible) f.col.push_back(c);
        }
      f.ptr.push_back(int(f.col.size()));
    }
  }
  // The leaves' near field must be the dense blocks (then it takes their order).
  auto& leaves = nf[L];
  const auto& dn = mt.dense;
  for (int a = 0; a < (1 << L); ++a) {
    std::vector<int> x(leaves.col.begin() + leaves.ptr[a], leaves.col.begin() + leaves.ptr[a + 1]),
        y(dn.col.begin() + dn.row_ptr[a], dn.col.begin() + dn.row_ptr[a + 1]);
    std::sort(x.begin(), x.end()), std::sort(y.begin(), y.end());
    if (x != y) return {};
  }
  leaves.ptr.assign(dn.row_ptr.begin(), dn.row_ptr.end()), leaves.col.assign(dn.col.begin(), dn.col.end());
  for (auto& f : nf) {
    f.mirror.assign(f.col.size(), -1);
    for (int t = 0; t + 1 < int(f.ptr.size()); ++t)
      for (int e = f.ptr[t]; e < f.ptr[t + 1]; ++e)
        if ((f.mirror[e] = f.find(f.col[e], t)) < 0) return {};
  }
  return nf;
}

// The most nodes in any node's near field, over all levels.
inline int largest_near_field(const std::vector<near_field>& near) {
  int most = 0;
  for (const auto& f : near)
    for (int t = 0; t + 1 < int(f.ptr.size()); ++t) most = std::max(most, f.ptr[t + 1] - f.ptr[t]);
  return most;
}

// The samples a node with nin near-field rows needs before its rank shows: nin, beyond 64 rows half
// the excess again, and block_size / 2 + p. Its near blocks come from Y Omega_N^+, which carries the
// far field's truncation tail times ||Omega_N^+||_F^2 = nin / (s - nin - 1) (a Gaussian's), and its
// Gram matrix squares Omega_N's condition number: both stay small (below 3, about 100) for any nin.
// With a fixed surplus (the paper's count) the top levels' tails leaked 80-fold (nin = 800), their
// ranks grew, and so did their parents' needs; a surplus of nin / 2 everywhere cost the weak
// structures of Schur complements a third more samples.
inline int samples_needed(int nin, int converge_samples, int block_size) {
  return nin + std::max(0, nin / 2 - 32) + converge_samples + (block_size + 1) / 2;
}
// With s samples, a node's projections go on with half that surplus over its near rows; a short node
// asks for all of it (0: enough).
inline int samples_short(int s, int nin, int converge_samples, int block_size) {
  const int need = samples_needed(nin, converge_samples, block_size);
  return s < nin + (need - nin + 1) / 2 ? need : 0;
}

// A level's share of the squared error budget per live node (nodes with rows): the share halves from
// each level to the next one down, since what a node's truncation discards reappears in its parent's
// samples as noise (columns of Omega that V^T does not see), and a parent with no more share than that
// noise chases it with rank (equal shares doubled the top ranks; quarters sampled more, with no fewer
// ranks). e: the absolute error the construction may spend (half of hara's tol ||M||).
inline double level_share(double e, int level, int depth, int live) {
  const double rho = 0.5, shares = (1 - std::pow(rho, depth)) / (1 - rho);
  return e * e / 2 * std::pow(rho, level - 1) / shares / std::max(live, 1);
}

// Node ranks (k[t], t = 0 .. nin.size() - 1; 0 for a node without rows): the smallest k whose held-out
// error (check[t * (ld + 1) + k]) fits the node's share, less what the same tail leaks through Omega_N^+
// into D (E ||Omega_N^+||_F^2 = nin / (s - nin - 1)). Returns 0, or the samples the level needs (s +
// block_size) when some node's samples cannot show a basis good enough; a rank above cap raises
// (node numbers from first).
inline int node_ranks(int level, int s, int ld, int converge_samples, int block_size, const std::vector<double>& check,
                      const std::vector<int>& nin, const std::vector<int>& nout, double share, int cap, double tol,
                      int first, std::vector<int>& k) {
  const int nodes = int(nin.size()), p = converge_samples;
  k.assign(std::size_t(nodes), 0);
  int need = 0;
  for (int t = 0; t < nodes; ++t) {
    if (nout[t] == 0) continue;
    const int w = std::min(s - nin[t], nout[t] + p), usable = std::min(nout[t], w - p);
    const double budget = share / (1 + double(nin[t]) / std::max(s - nin[t] - 1, 1));
    const double* err = check.data() + std::size_t(t) * (ld + 1);
    int keep = 0;
    while (keep < usable && err[keep] > budget) ++keep;
    if (err[keep] > budget && keep < nout[t]) {
      need = std::max(need, s + block_size);
      continue;
    }
    if (keep > cap)
      throw rank_cap_reached("h2expr: hara: level " + std::to_string(level) + ": node " + std::to_string(first + t) +
                             " needs rank " + std::to_string(keep) + " > max_rank " + std::to_string(cap) +
                             " for tol = " + std::to_string(tol) + "; raise hara_options::max_rank");
    k[std::size_t(t)] = keep;
  }
  return need;
}

// Node t's block of a level's panel of samples: base + at[t], leading dimension ld.
template <class T>
struct sample_panel {
  T* base = nullptr;
  std::vector<std::int64_t> at;
  int ld = 1;
};

// The test side's samples (Omega or Psi) as columns c0 .. c1 - 1, handed out in chunks: visit(c0, c1, f)
// calls f(chunk, first, cols) for consecutive ranges that cover c0 .. c1 - 1, where column first + j
// (j < cols) of node t sits at chunk.base + chunk.at[t] + (first + j) * chunk.ld, as in a whole panel.
// A panel held whole is one chunk (whole()); the leaves' Omega, and the bottom levels' Omega^ through
// the bases, are drawn again chunk by chunk instead of held (hara_one_sample_set.hpp), since every use
// of them is a sum over the columns or acts on each column alone.
template <class T>
using chunk_visitor = std::function<void(const sample_panel<T>&, int, int)>;
template <class T>
using column_source = std::function<void(int, int, const chunk_visitor<T>&)>;
template <class T>
column_source<T> whole(sample_panel<T> p) {
  return [p = std::move(p)](int c0, int c1, const chunk_visitor<T>& f) {
    if (c1 > c0) f(p, c0, c1 - c0);
  };
}

// A level's per-node blocks: bases ld x (ld + p) (at basis_at), G blocks ld x nearw (at row_block);
// s samples; level and side (0: Omega and Y, 1: Psi and Z) and seed pick the test matrix.
// Where a level's per-node blocks sit: ld rows each; a node's G or H block ld x nearw, its basis
// samples ld x width(), a near pair's block ld x ld.
struct level_blocks {
  int ld = 1, nearw = 1, p = 0;  // p: held-out columns of the basis samples
  int width() const { return ld + p; }  // of a node's basis samples W = Y P (at most its rows + p)
  std::int64_t basis_stride() const { return std::int64_t(ld) * width(); }
  std::int64_t basis_at(int t) const { return t * basis_stride(); }
  std::int64_t row_block(int t) const { return std::int64_t(t) * ld * nearw; }
  std::int64_t pair(int e) const { return std::int64_t(e) * ld * ld; }
};

struct projection_shape : level_blocks {
  int level = 0, side = 0, s = 0;
  std::uint64_t seed = 0;
};

// One side of a level: f the near fields of the projected nodes 0 .. nin.size() - 1, whose partners
// are nodes 0 .. rows.size() - 1 (rows[c] rows of partner c in om, at off[e] of pair e's stack, nin[t]
// stacked rows per node); nout[t] rows of node t in y.
template <class T>
struct near_side {
  const near_field& f;
  column_source<T> om;
  const std::vector<int>& rows;
  const std::vector<int>& off;
  const std::vector<int>& nin;
  const sample_panel<T>& y;
  const std::vector<int>& nout;
};

namespace near_projection {

// One test matrix R for every node of a level (s x w, w the level's widest basis sample: the
// orthonormal factor of a Gaussian's QR), with each node's rows of the samples times it, Omega_c R: a
// node's test columns are P' = (I - Omega_N^T K^{-1} Omega_N) R, R's part in the null space of Omega_N,
// and from Omega_c R no s x w matrix per node is formed. (A node's held-out estimates need its R
// independent of its own samples, not of the other nodes'.)
template <class T, class Space>
struct test_matrix {
  buffer<T, Space> r, rows, unit;  // R; Omega_c R (ld x w per node); (1 + delta) I, w x w
  int w = 0;
};
// R, and room for Omega_c R (zeros: add_rows() sums it over the chunks of Omega).
template <class T, class Space>
test_matrix<T, Space> draw(const context_ptr<Space>& ctx, const projection_shape& sh, const near_side<T>& x) {
  const int nodes = int(x.rows.size()), ld = sh.ld, s = sh.s, wd = std::min(sh.width(), s);
  test_matrix<T, Space> m{buffer<T, Space>(ctx, std::size_t(s) * wd), buffer<T, Space>(ctx, std::size_t(std::max(nodes, 1)) * ld * wd), {}, wd};
  fill_random(*ctx, distribution::normal, s, wd, m.r.data(), s,
              splitmix64(sh.seed ^ (0x6a09e667f3bcc909ull * std::uint64_t(1 + sh.level + 64 * sh.side + 256 * s))));
  buffer<T, Space> f(ctx, std::size_t(wd) * wd);
  qr_items(ctx, m.r.data(), {0}, {s}, {wd}, s, f.data(), {0}, wd);
  fill(*ctx, m.rows.data(), m.rows.size(), T(0));
  // P'^T P' = I - X^T X has rounding of about cond(K) eps; the shift keeps its Cholesky factorization
  // defined where P' is nearly rank deficient (w close to s - nin), at the cost of shrinking such a
  // column slightly (its basis is no worse; its held-out estimate a little low, with small probability).
  std::vector<T> unit(std::size_t(wd) * wd, T(0));
  for (int j = 0; j < wd; ++j) unit[std::size_t(j) * (wd + 1)] = T(1) + T(1024) * std::numeric_limits<T>::epsilon();
  m.unit = buffer<T, Space>(ctx, unit);
  return m;
}
// Omega_c R += one chunk's columns of Omega_c times R's rows of them, for every partner c.
template <class T, class Space>
void add_rows(const context_ptr<Space>& ctx, const projection_shape& sh, const near_side<T>& x, test_matrix<T, Space>& m,
              const sample_panel<T>& om, int first, int cols) {
  std::vector<item_gemm> items;
  for (int c = 0; c < int(x.rows.size()); ++c)
    items.push_back({x.rows[c], m.w, cols, om.at[c] + std::int64_t(first) * om.ld, first, std::int64_t(c) * sh.ld * m.w,
                     om.ld, sh.s, sh.ld});
  gemm_items(ctx, op::none, op::none, T(1), om.base, m.r.data(), T(1), m.rows.data(), items);
}

// W = Y P for nodes t0..t1 with P = P' C^{-T}, P' = (I - Omega_N^T K^{-1} Omega_N) R and C C^T = P'^T P'
// = I - X^T X, X = L^{-1} Omega_N R: Y P' = Y R - G Omega_N R, so W is products and solves of
// w-column blocks alone. Then the SVD of its first w - p columns in place and the held-out
// estimates of every truncation from the last p.
template <class T, class Space>
void basis_samples(const context_ptr<Space>& ctx, const projection_shape& sh, const near_side<T>& x,
                   const test_matrix<T, Space>& r, const buffer<T, Space>& a, const buffer<T, Space>& g, int t0, int t1,
                   T* basis, std::vector<double>& check) {
  const auto& f = x.f;
  const int cnt = t1 - t0, ld = sh.ld, s = sh.s, p = sh.p, wd = sh.width(), nw = sh.nearw;
  const std::int64_t gs = std::int64_t(nw) * nw, ss = std::int64_t(nw) * wd, cw = std::int64_t(wd) * wd;
  buffer<T, Space> S(ctx, std::size_t(cnt) * ss), X(ctx, std::size_t(cnt) * ss), C(ctx, std::size_t(cnt) * cw);
  std::vector<int> w(cnt), cn;
  std::vector<std::int64_t> co;
  std::vector<item_copy> stack, rtr;
  std::vector<item_gemm> xx, yr, gsw;
  std::vector<item_trsm> lx, wc;
  for (int t = t0; t < t1; ++t) {
    const int i = t - t0, nin = x.nin[t], nout = x.nout[t];
    w[i] = nout > 0 ? std::min(s - nin, nout + p) : 0;
    if (w[i] <= 0) continue;
    for (int e = f.ptr[t]; e < f.ptr[t + 1]; ++e)
      stack.push_back({x.rows[f.col[e]], w[i], std::int64_t(f.col[e]) * ld * r.w, i * ss + x.off[e], ld, nw});
    lx.push_back({nin, w[i], i * gs, i * ss, nw, nw});
    rtr.push_back({w[i], w[i], 0, i * cw, r.w, wd});
    xx.push_back({w[i], w[i], nin, i * ss, i * ss, i * cw, nw, nw, wd});
    cn.push_back(w[i]), co.push_back(i * cw);
    yr.push_back({nout, w[i], s, x.y.at[t], 0, sh.basis_at(t), x.y.ld, s, ld});
    gsw.push_back({nout, w[i], nin, sh.row_block(t), i * ss, sh.basis_at(t), ld, nw, ld});
    wc.push_back({nout, w[i], i * cw, sh.basis_at(t), wd, ld});
  }
  copy_items(ctx, r.rows.data(), S.data(), stack);  // Omega_N R, and a copy of it that L^{-1} overwrites
  copy_items(ctx, r.rows.data(), X.data(), stack);
  trsm_items(ctx, side::left, uplo::lower, op::none, diag::non_unit, T(1), a.data(), X.data(), lx);
  copy_items(ctx, r.unit.data(), C.data(), rtr);
  gemm_items(ctx, op::transpose, op::none, T(-1), X.data(), X.data(), T(1), C.data(), xx);  // P'^T P'
  const int bad = potrf_items(ctx, C.data(), co, cn, wd);
  if (bad >= 0)
    throw numerical_failure("h2expr: hara: level " + std::to_string(sh.level) + ": the test columns of a node's far field (" +
                            std::to_string(cn[bad]) + ") are numerically dependent");
  gemm_items(ctx, op::none, op::none, T(1), x.y.base, r.r.data(), T(0), basis, yr);   // Y R
  gemm_items(ctx, op::none, op::none, T(-1), g.data(), S.data(), T(1), basis, gsw);   // - G Omega_N R
  trsm_items(ctx, side::right, uplo::lower, op::transpose, diag::non_unit, T(1), C.data(), basis, wc);

  // Left singular vectors of W1 (nout x (w - p)) in place.
  buffer<T, Space> sigma(ctx, std::size_t(cnt) * ld);
  batch<T, Space> w1(ctx), sv(ctx);
  for (int t = t0; t < t1; ++t)
    if (w[t - t0] > p) {
      const int values = std::min(x.nout[t], w[t - t0] - p);
      w1.add(basis + sh.basis_at(t), x.nout[t], w[t - t0] - p, ld);
      sv.add(sigma.data() + std::int64_t(t - t0) * ld, values, 1, std::max(values, 1));
    }
  svd(w1, sv);
  // C = U^T W2 (u x p, ld ld), then W2 := W2 - U C and its Gram matrix (p x p, ld p): the error of
  // every truncation k <= u is a sum of squares, ||W2 - U C||^2 + sum_{i > k} ||C(i, :)||^2, with no
  // difference of large numbers (in float that difference alone would exceed the budget).
  const int cs = ld + p;
  buffer<T, Space> c(ctx, std::size_t(cnt) * cs * p);
  fill(*ctx, c.data(), c.size(), T(0));
  std::vector<item_gemm> uw, rw, ww;
  for (int t = t0; t < t1; ++t) {
    const int i = t - t0;
    if (w[i] <= p) continue;
    const int u = std::min(x.nout[t], w[i] - p);
    const std::int64_t w2 = sh.basis_at(t) + std::int64_t(w[i] - p) * ld, ct = std::int64_t(i) * cs * p;
    uw.push_back({u, p, x.nout[t], sh.basis_at(t), w2, ct, ld, ld, ld});
    rw.push_back({x.nout[t], p, u, sh.basis_at(t), ct, w2, ld, ld, ld});
    ww.push_back({p, p, x.nout[t], w2, w2, ct + std::int64_t(ld) * p, ld, ld, p});
  }
  gemm_items(ctx, op::transpose, op::none, T(1), basis, basis, T(0), c.data(), uw);
  gemm_items(ctx, op::none, op::none, T(-1), basis, c.data(), T(1), basis, rw);
  gemm_items(ctx, op::transpose, op::none, T(1), basis, basis, T(0), c.data(), ww);
  const auto ch = c.to_host();
  // check[t * (ld + 1) + k]: the held-out estimate of ||(I - U_k U_k^T) M(t, far)||_F^2, k = 0..ld.
  for (int t = t0; t < t1; ++t) {
    const int i = t - t0;
    if (w[i] <= p) continue;
    const T* ct = ch.data() + std::size_t(i) * cs * p;
    double rest = 0;
    for (int j = 0; j < p; ++j) rest += double(ct[std::size_t(ld) * p + j * p + j]);
    const int u = std::min(x.nout[t], w[i] - p);
    double* e = check.data() + std::size_t(t) * (ld + 1);
    for (int k = ld; k >= 0; --k) {
      e[k] = rest / p;
      if (k >= 1 && k <= u)
        for (int j = 0; j < p; ++j) rest += double(ct[std::size_t(j) * ld + k - 1]) * double(ct[std::size_t(j) * ld + k - 1]);
    }
  }
}

}  // namespace near_projection

// For each projected node t, with Omega_N its near field's rows of x.om stacked and K = Omega_N Omega_N^T
// = L L^T (nin x nin, L its Cholesky factor): G = Y Omega_N^+ = (Y Omega_N^T) K^{-1} (nout x nin at
// g + row_block(t)) and, when `basis` is given (zeroed, basis_at(t) for every projected node), the
// samples W = Y P of an orthonormal P (s x w) in the null space of Omega_N, their left singular vectors
// and in check (ld + 1 per node) the held-out estimate of every truncation. K's blocks are products
// Omega_a Omega_b^T of two partners' samples, which neighbouring nodes share (in 3D a pair sits in
// about four near fields): each is formed once (for as many nodes as 512 MB of them serve, in one
// pass over x.om's column chunks that also sums their Y Omega_N^T), and Omega_N is never copied. K squares Omega_N's condition number, which the surplus of s over nin keeps
// small (samples_needed(): a Gaussian's, about 10 at most); then every step is a product or a
// triangular solve. Nodes go in batches that bound the scratch.
template <class T, class Space>
void project_near_fields(const context_ptr<Space>& ctx, const projection_shape& sh, const near_side<T>& x,
                         buffer<T, Space>& g, T* basis, std::vector<double>* check) {
  const auto& f = x.f;
  const int nodes = int(x.nin.size()), all = int(x.rows.size()), ld = sh.ld, nw = sh.nearw, s = sh.s, wd = sh.width();
  const std::int64_t gs = std::int64_t(nw) * nw, ps = std::int64_t(ld) * ld;
  g = buffer<T, Space>(ctx, std::size_t(std::max(nodes, 1)) * ld * nw);
  fill(*ctx, g.data(), g.size(), T(0));
  near_projection::test_matrix<T, Space> r;
  if (basis) {
    check->assign(std::size_t(nodes) * (ld + 1), 0.0);
    r = near_projection::draw(ctx, sh, x);
  }
  const std::size_t per_node = std::size_t(gs) + (basis ? 2 * std::size_t(nw) * wd + std::size_t(wd) * wd : 0);
  // Nodes per batch of K's, and pair blocks at once: bounded by memory on the host; on the GPU a batch is
  // what one launch of each per-item kernel runs side by side (256 MB held 4 nodes of 3D's 2,500-row near
  // fields: 4 of an H200's 132 multiprocessors busy).
  const int batch = int(std::clamp<std::size_t>(space_traits<Space>::chunk_bytes(std::size_t(256) << 20) / sizeof(T) / per_node,
                                                1, std::max(nodes, 1)));
  const std::size_t pair_budget = space_traits<Space>::chunk_bytes(std::size_t(512) << 20) / sizeof(T) / std::size_t(ps);
  const auto key = [all](int a, int b) { return std::int64_t(std::max(a, b)) * all + std::min(a, b); };
  std::unordered_map<std::int64_t, std::int64_t> slot;  // pair (a >= b) -> its block Omega_a Omega_b^T
  for (int u0 = 0, u1 = 0; u0 < nodes; u0 = u1) {
    // Nodes u0..u1 while their pair blocks fit (one node at least); then their K's in batches.
    slot.clear();
    std::vector<std::int64_t> pairs;  // the keys of the new pair blocks, in slot order
    for (u1 = u0; u1 < nodes; ++u1) {
      std::vector<std::int64_t> fresh;
      for (int e1 = f.ptr[u1]; e1 < f.ptr[u1 + 1]; ++e1)
        for (int e2 = f.ptr[u1]; e2 <= e1; ++e2) {
          const std::int64_t k = key(f.col[e1], f.col[e2]);
          if (!slot.count(k) && std::find(fresh.begin(), fresh.end(), k) == fresh.end()) fresh.push_back(k);
        }
      if (u1 > u0 && slot.size() + fresh.size() > pair_budget) break;
      for (const std::int64_t k : fresh) {
        slot.emplace(k, std::int64_t(slot.size()) * ps);
        pairs.push_back(k);
      }
    }
    // One pass over Omega's columns: the pair blocks Omega_a Omega_b^T, Y Omega_N^T into G for nodes
    // u0..u1 and, the first time, Omega_c R.
    buffer<T, Space> pb(ctx, std::max<std::size_t>(slot.size(), 1) * std::size_t(ps));
    fill(*ctx, pb.data(), pb.size(), T(0));
    x.om(0, s, [&](const sample_panel<T>& om, int first, int cols) {
      const std::int64_t o = std::int64_t(first) * om.ld, oy = std::int64_t(first) * x.y.ld;
      std::vector<item_gemm> kk, yq;
      for (const std::int64_t k : pairs) {
        const int a = int(k / all), b = int(k % all);
        kk.push_back({x.rows[a], x.rows[b], cols, om.at[a] + o, om.at[b] + o, slot.at(k), om.ld, om.ld, ld});
      }
      for (int t = u0; t < u1; ++t)
        for (int e = f.ptr[t]; e < f.ptr[t + 1]; ++e)
          yq.push_back({x.nout[t], x.rows[f.col[e]], cols, x.y.at[t] + oy, om.at[f.col[e]] + o,
                        sh.row_block(t) + std::int64_t(x.off[e]) * ld, x.y.ld, om.ld, ld});
      gemm_items(ctx, op::none, op::transpose, T(1), om.base, om.base, T(1), pb.data(), kk);
      gemm_items(ctx, op::none, op::transpose, T(1), x.y.base, om.base, T(1), g.data(), yq);  // Y Omega_N^T
      if (basis && u0 == 0) near_projection::add_rows(ctx, sh, x, r, om, first, cols);
    });
    for (int t0 = u0; t0 < u1; t0 += batch) {
      const int t1 = std::min(u1, t0 + batch), cnt = t1 - t0;
      buffer<T, Space> a(ctx, std::size_t(cnt) * gs);
      std::vector<item_copy> kn, kt;
      std::vector<item_trsm> solve;
      std::vector<int> an;
      std::vector<std::int64_t> ao;
      for (int t = t0; t < t1; ++t) {
        const std::int64_t at = (t - t0) * gs;
        for (int e1 = f.ptr[t]; e1 < f.ptr[t + 1]; ++e1) {
          const int c1 = f.col[e1];
          for (int e2 = f.ptr[t]; e2 <= e1; ++e2) {  // K's lower block triangle (off grows with e)
            const int c2 = f.col[e2];
            (c1 >= c2 ? kn : kt)
                .push_back({x.rows[c1], x.rows[c2], slot.at(key(c1, c2)), at + x.off[e1] + std::int64_t(x.off[e2]) * nw, ld, nw});
          }
        }
        if (x.nin[t] > 0) an.push_back(x.nin[t]), ao.push_back(at);
        solve.push_back({x.nout[t], x.nin[t], at, sh.row_block(t), nw, ld});
      }
      copy_items(ctx, pb.data(), a.data(), kn);
      copy_items(ctx, pb.data(), a.data(), kt, op::transpose);
      const int bad = potrf_items(ctx, a.data(), ao, an, nw);
      if (bad >= 0)
        throw numerical_failure("h2expr: hara: level " + std::to_string(sh.level) + ": the samples of a near field (" +
                                std::to_string(an[bad]) + " rows) are numerically dependent");
      trsm_items(ctx, side::right, uplo::lower, op::transpose, diag::non_unit, T(1), a.data(), g.data(), solve);
      trsm_items(ctx, side::right, uplo::lower, op::none, diag::non_unit, T(1), a.data(), g.data(), solve);
      if (basis) near_projection::basis_samples(ctx, sh, x, r, a, g, t0, t1, basis, *check);
    }
  }
}

}  // namespace h2expr::detail
