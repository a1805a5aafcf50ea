#pragma once
// HARA: an H2 matrix from products with blocks of vectors alone (section 3 of the HARA paper),
// written once for every space. The sampling tree is the weak one (the sibling blocks (t, t^1) of
// every level); the approximation tree is the target structure, which refines it. Level by level
// from the root:
//   1. sampling: structured random blocks (random on the column sibling, zero elsewhere) times the
//      operator minus the H2 matrix built so far (peeling: the coarser levels cancel), read on the
//      row sibling; every sibling block of a level is sampled by the same products;
//   2. batched ARA of those blocks (range_finder), then B = (M - H)^T Q by one transposed product;
//   3. the low rank updates Q B^T enter H in H2 form (h2/low_rank_update.hpp): extra basis columns,
//      orthonormal and nested, coupling blocks under the updated sibling blocks, products in the
//      dense leaves;
//   4. recompression of H (orthogonalize, weights, truncation), so ranks stay minimal.
// The diagonal dense leaves come last, from one product with a block of identities.
// Symmetric operators sample only the (left, right) blocks: (right, left) is their transpose.
#include <h2expr/detail/core/splitmix.hpp>
#include <h2expr/detail/randomized/ara.hpp>
#include <h2expr/detail/h2/compact.hpp>
#include <h2expr/detail/h2/compress.hpp>
#include <h2expr/detail/h2/hgemv.hpp>
#include <h2expr/detail/h2/low_rank_update.hpp>
#include <h2expr/detail/h2/orthogonalize.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/randomized/sampler.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>
#include <ostream>
#include <string>
#include <vector>

namespace h2expr::detail {

struct hara_parameters {
  double tol = 1e-4;
  int max_rank = 0;  // per sibling block; 0: min(block size, 512)
  int block_size = 32;
  int converge_samples = 10;
  std::uint64_t seed = 0;
  // One sample set: a bottom level's test side (Omega^ = V^T Omega) is drawn through the bases where
  // read, not held, once holding it would take more than this share of the memory available (0: always
  // drawn; infinity: always held). Drawing costs the products again at every read (the inverse: 2.3%
  // more time at n = 2^14, 9-18% in the last steps at 2^17), so it is kept for where memory is short.
  double hold_share = 0.125;
  // One sample set: once the leaves are built, a round's new columns can go through the finished
  // levels in blocks as they are drawn, so that no finished level's panel (the leaves' Y, their
  // parents' Y^ and Omega^: each about n rows) holds the whole round. -1: blocks only where those three
  // panels would take more than hold_share of the memory available, as wide as fit then (at least
  // 256); 0: never; else blocks this wide (rounded up to a multiple of 256). Each block computes the
  // finished levels' B^T D again, so sizes that fit keep whole rounds.
  int stream_columns = -1;
};

// What one level of the construction did (level 0 of the list is unused; depth + 1 is the dense
// diagonal).
struct hara_level_report {
  int level = 0;
  int blocks = 0;   // sibling blocks sampled
  int samples = 0;  // columns of the blocks of vectors the operator was applied to (M and M^T)
  int rank_min = 0, rank_max = 0;  // ARA ranks of the blocks
  double rank_avg = 0;
  std::vector<int> ranks_after;  // H2 ranks per level after this level's recompression
  double seconds_sampling = 0, seconds_ara = 0, seconds_update = 0, seconds_compress = 0;
  compress_phases compression;  // seconds_compress by phase
  bool test_side_drawn = false;  // its Omega^ (Psi^) drawn through the bases below where read, not held
  int blocks_streamed = 0;  // blocks of a round's new columns compressed through it as they were drawn
};

// Node ranks for HARA's recompressions: tree level l may discard budget2 / l of squared Frobenius
// error per recompression, split over its nodes in proportion to their weights' norms. Level l is
// recompressed with new content l times (once per HARA level above it), so its losses add to about
// budget2 (independent contents add in squares), and the levels' add to at most (L + 1) sqrt(budget2).
struct keep_frobenius_share {
  double budget2;
  template <class T>
  std::vector<int> operator()(int level, const std::vector<T>& sigma, int k) const {
    double total = 0;
    for (T s : sigma) total += double(s) * double(s);
    return (*this)(level, sigma, k, total);
  }
  // With the level's total given (a distributed level's: over every rank's nodes).
  template <class T>
  std::vector<int> operator()(int level, const std::vector<T>& sigma, int k, double total) const {
    const std::size_t nodes = sigma.size() / std::size_t(std::max(k, 1));
    std::vector<int> r(nodes, 0);
    if (total == 0) return r;
    for (std::size_t t = 0; t < nodes; ++t) {
      double z2 = 0;
      for (int i = 0; i < k; ++i) z2 += double(sigma[t * k + i]) * double(sigma[t * k + i]);
      const double allowed = budget2 / std::max(level, 1) * z2 / total;
      double tail = 0;
      int keep = k;
      while (keep > 0) {
        const double s = double(sigma[t * k + keep - 1]);
        if (tail + s * s > allowed) break;
        tail += s * s, --keep;
      }
      r[t] = keep;
    }
    return r;
  }
};

// One line of hara's `verbose` log: a level's blocks, samples, ranks and times, then the H2 ranks.
inline void print_hara_level(std::ostream* log, const hara_level_report& r, int depth) {
  if (!log) return;
  char line[320];
  const double t = r.seconds_sampling + r.seconds_ara + r.seconds_update + r.seconds_compress;
  std::string ranks;
  for (int v : r.ranks_after) ranks += " " + std::to_string(v);
  if (r.level <= depth)
    std::snprintf(line, sizeof line,
                  "hara: level %2d  blocks %5d  samples %5d  rank %d/%.1f/%d  time %.3f s (sampling %.3f, ARA %.3f, "
                  "update %.3f, compression %.3f)  ranks:",
                  r.level, r.blocks, r.samples, r.rank_min, r.rank_avg, r.rank_max, t, r.seconds_sampling,
                  r.seconds_ara, r.seconds_update, r.seconds_compress);
  else
    std::snprintf(line, sizeof line, "hara: dense diagonal  blocks %5d  samples %5d  time %.3f s  ranks:", r.blocks,
                  r.samples, t);
  *log << line << ranks << (r.test_side_drawn ? "  (test side drawn through the bases)" : "") << std::endl;
}

template <class T, class Space>
class hara_builder {
 public:
  hara_builder(const sampler<T, Space>& M, const ::h2expr::structure<T>& S, hara_parameters p)
      : M_(M), ctx_(M.context_ptr()), p_(p), sym_(M.symmetric()), H_(zero_h2<T, Space>(ctx_, S, sym_)) {
    const auto& tree = S.row_tree();
    L_ = S.depth(), m_ = H_.m_max, n_ = S.rows(), np_ = std::int64_t(m_) << L_;
    sizes_.resize(std::size_t(2) << L_);
    for (int node = 0; node < tree.nodes(); ++node) sizes_[node] = tree.size(node);
  }

  // Runs the whole construction; `log` (may be null) gets a line per level.
  h2_data<T, Space> run(std::vector<hara_level_report>& report, std::ostream* log) {
    norm_ = frobenius_estimate();
    const auto use = sibling_blocks_in_use(H_.structure.blocks());
    for (int l = 1; l <= L_; ++l) {
      if (std::none_of(use[l].begin(), use[l].end(), [](char c) { return c != 0; })) continue;
      report.push_back(level(l, use[l]));
      print_hara_level(log, report.back(), L_);
    }
    report.push_back(diagonal());
    print_hara_level(log, report.back(), L_);
    if (!kept_.rows.empty()) compact(H_, kept_.rows, kept_.cols);  // each node at its own rank, unpadded
    return std::move(H_);
  }
  double norm_estimate() const { return norm_; }

 private:
  using clock = std::chrono::steady_clock;
  double since(clock::time_point t0) const { return seconds_since(*ctx_, t0); }

  // ||M||_F from E ||M w||^2 = ||M||_F^2 over Gaussian w.
  double frobenius_estimate() {
    const int probes = 8;
    auto X = matrix<T, Space>::random(n_, probes, p_.seed ^ 0x5851f42d4c957f2dull, ctx_);
    auto Y = matrix<T, Space>::uninitialized(n_, probes, ctx_);
    M_.apply(X.view(), Y.view());
    const double f = std::sqrt(sum_of_squares(*ctx_, Y.data(), std::size_t(n_) * probes) / probes);
    require<non_finite_value>(std::isfinite(f), "hara: the operator's products are not finite");
    return f;
  }

  // Yp = (M - H) Xp (or the transposes), both np x w in padded tree order.
  void residual(bool transpose, const T* Xp, T* Yp, int w) {
    auto& c = *ctx_;
    samples_ += w;
    if (H_.works_in(M_.tree_order())) {  // the operator's products in this tree's order: no reordering
      const op t = transpose ? op::transpose : op::none;
      const const_view<T, Space> X(Xp, np_, w, np_, &c);
      const view<T, Space> Y(Yp, np_, w, np_, &c);
      M_.tree_apply(t, X, Y);
      if (peel_) hgemv_padded(H_, t, T(-1), X, T(1), Y);
      return;
    }
    const int* map = H_.arrays->padded_to_user.data();
    auto X = matrix<T, Space>::uninitialized(n_, w, ctx_), Y = matrix<T, Space>::uninitialized(n_, w, ctx_);
    scatter_rows(c, map, np_, Xp, np_, X.data(), n_, w);
    if (transpose) M_.apply_transpose_off_diagonal(X.view(), Y.view());  // hara() adds M's diagonal part
    else M_.apply_off_diagonal(X.view(), Y.view());
    if (peel_) {
      auto Z = matrix<T, Space>::uninitialized(n_, w, ctx_);
      hgemv(H_, transpose ? op::transpose : op::none, const_view<T, Space>(X.view()), Z.view());
      axpy(c, std::size_t(n_) * w, T(-1), Z.data(), Y.data());
    }
    gather_rows(c, map, np_, Y.data(), n_, Yp, np_, w);
  }

  int node_size(int l, int t) const { return sizes_[cluster_tree::level_begin(l) + t]; }

  hara_level_report level(int l, const std::vector<char>& used) {
    auto& c = *ctx_;
    hara_level_report rep;
    rep.level = l;
    samples_ = 0;
    const auto t_level = clock::now();
    double sampling = 0;
    const int P = m_ << (L_ - l), G = sym_ ? 1 : 2;
    // Items: (t, t^1); symmetric operators only the left nodes. Group g: 0 reads even rows (input on
    // odd nodes), 1 the reverse; the groups are separate columns of one product.
    std::vector<int> row_node, rows, full, limit;
    for (int t = 0; t < (1 << l); ++t) {
      if (!used[t] || (sym_ && (t & 1))) continue;
      const int f = std::min(node_size(l, t), node_size(l, t ^ 1));
      row_node.push_back(t), rows.push_back(P), full.push_back(f);
      const int cap = p_.max_rank > 0 ? p_.max_rank : 512;
      limit.push_back(std::min(f, cap));
    }
    const int count = int(row_node.size());
    rep.blocks = count;
    // The paper's criterion per block. (A 4x looser one saved 20% of the samples in 2D, but let the
    // error of a 3D exponential kernel at 1e-2 reach 1.1e-2, against 5.4e-3 with this one.)
    range_finder<T, Space> rf(ctx_, rows, full, limit, {p_.tol, p_.block_size, p_.converge_samples});
    rf.run(
        [&](const ara_round<T>& req) {
          const auto t0 = clock::now();
          const int cnt = int(req.items.size());
          const int s = *std::max_element(req.samples.begin(), req.samples.end()), w = G * s;
          buffer<T, Space> Xp(ctx_, std::size_t(np_) * w), Yp(ctx_, std::size_t(np_) * w);
          fill(c, Xp.data(), Xp.size(), T(0));
          // Block i draws its samples on the column node t^1 and reads them on the row node t.
          batch<T, Space> draws(ctx_), dst(ctx_);
          batch<const T, Space> src(ctx_);
          for (int p = 0; p < cnt; ++p) {
            const int t = row_node[req.items[p]], g = t & 1, sp = req.samples[p];
            const std::int64_t column_block = std::int64_t(g) * s * np_;
            draws.add(Xp.data() + std::int64_t(t ^ 1) * P + column_block, P, sp, int(np_));
            src.add(Yp.data() + std::int64_t(t) * P + column_block, P, s, int(np_));
            dst.add(req.outputs[p], P, s, P);
          }
          fill_random(distribution::normal, draws, req.seed);
          residual(false, Xp.data(), Yp.data(), w);
          copy(src, dst);
          sampling += since(t0);
        },
        splitmix64(p_.seed + 0x9e3779b97f4a7c15ull * std::uint64_t(l)));

    // Ranks, and blocks that did not converge.
    std::vector<int> k(count);
    int kmax = 0;
    double ksum = 0;
    rep.rank_min = count ? std::numeric_limits<int>::max() : 0;
    for (int i = 0; i < count; ++i) {
      const auto& st = rf.state(i);
      if (!st.converged)
        throw rank_cap_reached("h2expr: hara: level " + std::to_string(l) + ": the block of nodes (" +
                               std::to_string(row_node[i]) + ", " + std::to_string(row_node[i] ^ 1) +
                               ") reached rank " + std::to_string(st.columns) + " (max_rank " +
                               std::to_string(limit[i]) + ") before tol = " + std::to_string(p_.tol) +
                               "; raise hara_options::max_rank");
      k[i] = st.columns, kmax = std::max(kmax, k[i]), ksum += k[i];
      rep.rank_min = std::min(rep.rank_min, k[i]), rep.rank_max = std::max(rep.rank_max, k[i]);
    }
    rep.rank_avg = count ? ksum / count : 0;

    if (kmax > 0) {
      // B = (M - H)^T Q: Q on the row node, read on the column node, one product for all blocks.
      const auto t0 = clock::now();
      const int w = G * kmax;
      buffer<T, Space> Xp(ctx_, std::size_t(np_) * w), Zp(ctx_, std::size_t(np_) * w);
      fill(c, Xp.data(), Xp.size(), T(0));
      // The bases, k[i] columns each, in one batched copy per destination (not one per block).
      batch<const T, Space> bases(ctx_);
      batch<T, Space> xb(ctx_);
      for (int i = 0; i < count; ++i) {
        const int t = row_node[i];
        bases.add(rf.basis(i), P, k[i], P);
        xb.add(Xp.data() + std::int64_t(t) * P + std::int64_t(t & 1) * kmax * np_, P, k[i], int(np_));
      }
      copy(bases, xb);
      residual(true, Xp.data(), Zp.data(), w);
      sampling += since(t0);

      // Explicit level-l bases: Wrow(t) = Q of (t, t^1); Wcol(t^1) = its B (symmetric: one W, Q on the
      // left node and B on the right one).
      const auto t1 = clock::now();
      const std::size_t wsize = (std::size_t(1) << l) * P * kmax;
      buffer<T, Space> Wrow(ctx_, wsize), Wcol(ctx_, sym_ ? 0 : wsize);
      fill(c, Wrow.data(), wsize, T(0));
      if (!sym_) fill(c, Wcol.data(), wsize, T(0));
      T* wcol = sym_ ? Wrow.data() : Wcol.data();
      std::vector<std::int64_t> zo(count), wo(count);
      batch<T, Space> wq(ctx_);
      for (int i = 0; i < count; ++i) {
        const int t = row_node[i];
        wq.add(Wrow.data() + std::int64_t(t) * P * kmax, P, k[i], P);
        zo[i] = std::int64_t(t ^ 1) * P + std::int64_t(t & 1) * kmax * np_;
        wo[i] = std::int64_t(t ^ 1) * P * kmax;
      }
      copy(bases, wq);
      copy_blocks(ctx_, P, kmax, Zp.data(), zo, int(np_), wcol, wo, P);
      std::vector<char> updated(std::size_t(1) << l, 0);
      for (int i = 0; i < count; ++i) {
        updated[row_node[i]] = 1;
        if (sym_) updated[row_node[i] ^ 1] = 1;
      }
      append_level_update(H_, l, kmax, Wrow.data(), wcol, updated);
      rep.seconds_update = since(t1);

      const auto t2 = clock::now();
      // Weights from the rows alone measure half of what a truncation discards (rows and columns)
      const double budget = weights_from_rows_alone(H_) ? budget2() / 2 : budget2();
      kept_ = recompress(H_, keep_frobenius_share{budget}, &rep.compression);
      rep.seconds_compress = since(t2);
      peel_ = true;
    }
    rep.samples = samples_;
    rep.seconds_sampling = sampling;
    rep.seconds_ara = since(t_level) - sampling - rep.seconds_update - rep.seconds_compress;
    rep.ranks_after = H_.rank;
    return rep;
  }

  // The diagonal dense leaves: (M - H) times a block of identities, one per leaf, read per leaf.
  hara_level_report diagonal() {
    auto& c = *ctx_;
    hara_level_report rep;
    rep.level = L_ + 1;
    samples_ = 0;
    const auto t0 = clock::now();
    const int leaves = 1 << L_;
    buffer<T, Space> Xp(ctx_, std::size_t(np_) * m_), Yp(ctx_, std::size_t(np_) * m_);
    fill(c, Xp.data(), Xp.size(), T(0));
    auto I = identity_buffer<T, Space>(ctx_, m_);
    std::vector<std::int64_t> zero(leaves, 0), at(leaves);
    for (int a = 0; a < leaves; ++a) at[a] = std::int64_t(a) * m_;
    copy_blocks(ctx_, m_, m_, I.data(), zero, m_, Xp.data(), at, int(np_));
    residual(false, Xp.data(), Yp.data(), m_);
    const auto& dn = H_.structure.blocks().dense;
    std::vector<std::int64_t> src, dst;
    for (int a = 0; a < dn.level_size(); ++a)
      for (int e = dn.row_ptr[a]; e < dn.row_ptr[a + 1]; ++e)
        if (dn.col[e] == a) src.push_back(std::int64_t(a) * m_), dst.push_back(std::int64_t(e) * m_ * m_);
    copy_blocks(ctx_, m_, m_, Yp.data(), src, int(np_), H_.dense.data(), dst, m_);
    rep.blocks = int(src.size());
    rep.samples = samples_;
    rep.seconds_sampling = since(t0);
    rep.ranks_after = H_.rank;
    return rep;
  }

  // Squared Frobenius error each tree level's truncations may add (keep_frobenius_share): half the
  // tolerance, split linearly over the levels (a sqrt split let the error reach 1.7 tol, and without
  // the per-recompression split of keep_frobenius_share it reached 1.6 tol at 11 levels).
  double budget2() const {
    const double e = 0.5 * p_.tol * norm_ / double(L_ + 1);
    return e * e;
  }

  const sampler<T, Space>& M_;
  context_ptr<Space> ctx_;
  hara_parameters p_;
  bool sym_;
  h2_data<T, Space> H_;
  kept_ranks kept_;  // node ranks of the last recompression: the result is stored at them
  int L_ = 0, m_ = 1;
  index n_ = 0;
  std::int64_t np_ = 0;
  std::vector<int> sizes_;
  double norm_ = 0;
  int samples_ = 0;
  bool peel_ = false;  // whether H holds anything to subtract yet
};

}  // namespace h2expr::detail
