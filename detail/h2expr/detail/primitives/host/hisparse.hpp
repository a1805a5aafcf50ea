#pragma once
// The HiSparse product of the host space: Y = alpha op(H) X + beta Y from the one stored tree, for
// op(H) = H and H^T alike (hisparse_format.hpp).
//
// The output is cut into bands of B rows (of H's columns for H^T), B = d 2^k; a band is one task
// (OpenMP, dynamic), so no two threads ever add into the same outputs and each output is summed in
// one fixed order: the result does not depend on the number of threads. A task walks the tree down
// to the nodes that meet its band; a node wider than the band gives up only the band's part, found
// by binary search in its Morton order (a row band of a node is a run of aligned squares of side B,
// each a contiguous range; a column band the same with the roles swapped). The vectors go through in
// panels of up to 8: each panel of X is first packed row-major (a row's 8 values in one cache line)
// and each task sums into a row-major accumulator of its band, so an entry costs one contiguous
// 8-wide multiply-add, whatever the direction.
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/core/host/memory.hpp>
#include <h2expr/detail/primitives/hisparse_format.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace h2expr::detail {

namespace hisparse {

// One band's walk for one panel of W vectors; Trans: the band is of columns of H.
template <class T, int W, bool Trans, bool Packed>
struct band_walk {
  const geometry& g;
  const unsigned char* pool;
  const T* x;          // the panel: packed (W values per input index), or X itself (nv columns, ldx apart)
  std::int64_t ldx;
  int nv;
  T* acc;              // the band's accumulator: W values per output index
  std::int64_t b0, B;  // the band: outputs b0 .. b0 + B

  void add(std::int64_t r, std::int64_t c, T v) const {
    const std::int64_t out = Trans ? c : r, in = Trans ? r : c;
    if constexpr (Packed) {
      add_row(acc + (out - b0) * W, x + in * W, v);
    } else {
      T* a = acc + (out - b0) * W;
      for (int w = 0; w < nv; ++w) a[w] += v * x[in + w * ldx];
    }
  }
  // a += v xi over W values; restrict (as a and x may alias for all the compiler knows) lets it
  // vectorize this (measured: without it, the transposed product ran at half the other's speed).
  static void add_row(T* __restrict__ a, const T* __restrict__ xi, T v) {
#pragma omp simd
    for (int w = 0; w < W; ++w) a[w] += v * xi[w];
  }

  template <int Width>
  void coo_range(const unsigned char* p, std::uint32_t n, std::uint32_t e0, std::uint32_t e1, std::int64_t r0,
                 std::int64_t c0) const {
    const unsigned char* values = p + coo_values_offset<T>(n, Width);
    if constexpr (!Trans && Packed) {
      // Entries of one row of a d x d block follow each other (row-major inside the block): their sum
      // stays in registers until the row or the block changes. (Never across blocks: which blocks
      // meet in one range depends on the band width, and the sums must not.)
      T* a0 = acc + (r0 - b0) * W;
      const T* x0 = x + c0 * W;
      T s[W] = {};
      std::uint32_t row = 0, block = 0;
      bool open = false;
      for (std::uint32_t e = e0; e < e1; ++e) {
        std::uint32_t r, c;
        coordinates<Width>(p, e, r, c);
        T v;
        std::memcpy(&v, values + std::size_t(e) * sizeof(T), sizeof(T));
        const std::uint32_t b = c >> g.log_d;
        if (open && (r != row || b != block)) {
          for (int w = 0; w < W; ++w) a0[std::size_t(row) * W + w] += s[w], s[w] = T(0);
        }
        row = r, block = b, open = true;
        const T* xi = x0 + std::size_t(c) * W;
        for (int w = 0; w < W; ++w) s[w] += v * xi[w];
      }
      if (open)
        for (int w = 0; w < W; ++w) a0[std::size_t(row) * W + w] += s[w];
    } else {
      for (std::uint32_t e = e0; e < e1; ++e) {
        std::uint32_t r, c;
        coordinates<Width>(p, e, r, c);
        T v;
        std::memcpy(&v, values + std::size_t(e) * sizeof(T), sizeof(T));
        add(r0 + r, c0 + c, v);
      }
    }
  }
  void coo_all(unsigned k, const unsigned char* p, std::int64_t r0, std::int64_t c0) const {
    const std::uint32_t n = count(p);
    if (k == coo1) coo_range<1>(p, n, 0, n, r0, c0);
    else if (k == coo2) coo_range<2>(p, n, 0, n, r0, c0);
    else coo_range<4>(p, n, 0, n, r0, c0);
  }
  // The entries of a COO node (side 2^log_side > B) in this band.
  template <int Width>
  void coo_band(const unsigned char* p, int log_side, std::int64_t r0, std::int64_t c0) const {
    const std::uint32_t n = count(p);
    const std::int64_t side = std::int64_t(1) << log_side, o = b0 - (Trans ? c0 : r0), squares = side / B;
    if (squares > std::int64_t(n)) {  // fewer entries than squares: filter them
      const unsigned char* values = p + coo_values_offset<T>(n, Width);
      for (std::uint32_t e = 0; e < n; ++e) {
        std::uint32_t r, c;
        coordinates<Width>(p, e, r, c);
        const std::int64_t out = Trans ? c : r;
        if (out < o || out >= o + B) continue;
        T v;
        std::memcpy(&v, values + std::size_t(e) * sizeof(T), sizeof(T));
        add(r0 + r, c0 + c, v);
      }
      return;
    }
    for (std::int64_t s = 0; s < squares; ++s) {
      const std::uint32_t sr = std::uint32_t(Trans ? s * B : o), sc = std::uint32_t(Trans ? o : s * B);
      const std::uint64_t lo = entry_key(sr, sc, g.log_d), hi = lo + std::uint64_t(B) * std::uint64_t(B);
      const std::uint32_t e0 = lower_entry<Width>(p, n, lo, g.log_d);
      const std::uint32_t e1 = lower_entry<Width>(p, n, hi, g.log_d);
      coo_range<Width>(p, n, e0, e1, r0, c0);
    }
  }
  void dense(const unsigned char* p, std::int64_t r0, std::int64_t c0) const {
    const int d = g.d();
    const std::int64_t mi = std::min<std::int64_t>(d, g.rows - r0), mj = std::min<std::int64_t>(d, g.cols - c0);
    for (std::int64_t i = 0; i < mi; ++i) {
      const unsigned char* row = p + std::size_t(i) * d * sizeof(T);
      for (std::int64_t j = 0; j < mj; ++j) {
        T v;
        std::memcpy(&v, row + std::size_t(j) * sizeof(T), sizeof(T));
        if (v != T(0)) add(r0 + i, c0 + j, v);
      }
    }
  }
  // A node that lies inside the band: all of it.
  void whole(ref x, int level, std::int64_t r0, std::int64_t c0) const {
    const unsigned k = kind_of(x);
    if (k == none) return;
    const unsigned char* p = pool + offset_of(x);
    if (is_coo(k)) return coo_all(k, p, r0, c0);
    if (k == dense_leaf) return dense(p, r0, c0);
    const int shift = g.log_side(level) - g.log_d, d = g.d();
    if (k == sparse_inner) {
      const std::uint32_t n = count(p);
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint16_t pos = child_position(p, i);
        whole(child_ref(p, n, i), level + 1, r0 + (std::int64_t(pos >> 8) << shift), c0 + (std::int64_t(pos & 255u) << shift));
      }
    } else {
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j)
          whole(dense_child(p, i, j), level + 1, r0 + (std::int64_t(i) << shift), c0 + (std::int64_t(j) << shift));
    }
  }
  ref dense_child(const unsigned char* p, int i, int j) const {
    ref y;
    std::memcpy(&y, p + 4 * (std::size_t(i) * std::size_t(g.d()) + std::size_t(j)), 4);
    return y;
  }
  // A node that meets the band (any node, any side).
  void visit(ref x, int level, std::int64_t r0, std::int64_t c0) const {
    const unsigned k = kind_of(x);
    if (k == none) return;
    const int log_side = g.log_side(level);
    if ((std::int64_t(1) << log_side) <= B) return whole(x, level, r0, c0);
    const unsigned char* p = pool + offset_of(x);
    if (k == coo1) return coo_band<1>(p, log_side, r0, c0);
    if (k == coo2) return coo_band<2>(p, log_side, r0, c0);
    if (k == coo4) return coo_band<4>(p, log_side, r0, c0);
    // An inner node: its children of side 2^shift in the band's child rows (columns) q0 .. q0 + t.
    const int d = g.d(), shift = log_side - g.log_d;
    const std::int64_t o = b0 - (Trans ? c0 : r0);
    const std::int64_t child = std::int64_t(1) << shift;
    const int q0 = int(o >> shift), t = child >= B ? 1 : int(B / child);
    auto go = [&](int i, int j, ref y) {
      const std::int64_t cr = r0 + (std::int64_t(i) << shift), cc = c0 + (std::int64_t(j) << shift);
      if (child >= B) visit(y, level + 1, cr, cc);
      else whole(y, level + 1, cr, cc);
    };
    if (k == dense_inner) {
      for (int q = q0; q < q0 + t; ++q)
        for (int j = 0; j < d; ++j) {
          if (Trans) go(j, q, dense_child(p, j, q));
          else go(q, j, dense_child(p, q, j));
        }
      return;
    }
    const std::uint32_t n = count(p);
    const int squares = d / t;  // aligned t x t squares of children along the band
    int log2n = 1;
    while ((1u << log2n) < n) ++log2n;
    if (std::int64_t(squares) * log2n * 2 >= std::int64_t(n)) {  // as cheap to look at every child
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint16_t pos = child_position(p, i);
        const int ci = pos >> 8, cj = pos & 255, q = Trans ? cj : ci;
        if (q >= q0 && q < q0 + t) go(ci, cj, child_ref(p, n, i));
      }
      return;
    }
    for (int s = 0; s < squares; ++s) {
      const std::uint32_t si = std::uint32_t(Trans ? s * t : q0), sj = std::uint32_t(Trans ? q0 : s * t);
      const std::uint64_t lo = morton(si, sj), hi = lo + std::uint64_t(t) * std::uint64_t(t);
      for (std::uint32_t i = lower_child(p, n, lo), end = lower_child(p, n, hi); i < end; ++i) {
        const std::uint16_t pos = child_position(p, i);
        go(pos >> 8, pos & 255, child_ref(p, n, i));
      }
    }
  }
};

// Y(0:out, 0:nv) = alpha op(H) X + beta Y for one panel of nv <= W vectors (packed first when Packed).
template <class T, int W, bool Trans, bool Packed>
void multiply_panel(const geometry& g, const unsigned char* pool, std::int64_t B, T alpha, const T* X,
                    std::int64_t ldx, T beta, T* Y, std::int64_t ldy, int nv, T* xp, std::vector<T>* accs,
                    std::int64_t nnz, int threads) {
  const std::int64_t in = Trans ? g.rows : g.cols, out = Trans ? g.cols : g.rows;
  if constexpr (Packed) {
    // Threads only where the work pays for waking them (idle OpenMP workers spin, taking cycles from
    // the BLAS threads of the next operation).
    [[maybe_unused]] const bool parallel_pack = threads > 1 && in * W > 65536;
#pragma omp parallel for schedule(static) if (parallel_pack)
    for (std::int64_t i = 0; i < in; ++i)
      for (int w = 0; w < W; ++w) xp[i * W + w] = w < nv ? X[i + std::int64_t(w) * ldx] : T(0);
  }
  const std::int64_t bands = (out + B - 1) / B;
  [[maybe_unused]] const bool parallel = threads > 1 && bands > 1 && (nnz + out) * std::int64_t(nv) > 32768;
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (std::int64_t b = 0; b < bands; ++b) {
#if defined(_OPENMP)
    std::vector<T>& acc = accs[omp_get_thread_num()];
#else
    std::vector<T>& acc = accs[0];
#endif
    std::fill(acc.begin(), acc.end(), T(0));
    const band_walk<T, W, Trans, Packed> walk{g, pool, Packed ? xp : X, ldx, nv, acc.data(), b * B, B};
    walk.visit(g.root, 0, 0, 0);
    const std::int64_t o1 = std::min(out, (b + 1) * B);
    for (int w = 0; w < nv; ++w) {
      T* y = Y + std::int64_t(w) * ldy;
      for (std::int64_t o = b * B; o < o1; ++o) {
        const T s = alpha * acc[std::size_t(o - b * B) * W + w];
        y[o] = beta == T(0) ? s : s + beta * y[o];
      }
    }
  }
}

}  // namespace hisparse

// Y(0:out, 0:nv) = alpha op(H) X + beta Y (beta == 0 does not read Y), op(H) = H^T when trans.
template <class T>
void hisparse_multiply(context<host>& c, const hisparse::tree_view& h, bool trans, T alpha, const T* X,
                       std::int64_t ldx, T beta, T* Y, std::int64_t ldy, int nv) {
  const auto& g = h.g;
  const std::int64_t in = trans ? g.rows : g.cols, out = trans ? g.cols : g.rows;
  if (out == 0 || nv == 0) return;
  const int threads = context<host>::threads();
  constexpr int max_w = 8;
  // Packing a panel reads all of X once: worth it unless the matrix has far fewer entries than X rows.
  const bool packed = 2 * h.nnz >= in;
  const std::size_t packed_size = packed ? std::size_t(std::max<std::int64_t>(in, 1)) * max_w : 0;
  T* xp = allocate<T>(c, packed_size);
  struct release {
    context<host>& c;
    T* p;
    std::size_t n;
    ~release() { deallocate(c, p, n); }
  } guard{c, xp, packed_size};
  std::vector<std::vector<T>> accs(static_cast<std::size_t>(threads));
  for (int v0 = 0; v0 < nv; v0 += max_w) {
    const int w = std::min(max_w, nv - v0);
    const T* x = X + std::int64_t(v0) * ldx;
    T* y = Y + std::int64_t(v0) * ldy;
    auto run = [&](auto width) {
      constexpr int Wd = decltype(width)::value;
      // Bands of B = d 2^k outputs: at least 4 per thread, at most 32,768 values in a band's accumulator
      // (it stays in the core's cache); wide bands cut fewer nodes, so fewer binary searches.
      std::int64_t B = g.d();
      while (B * Wd < 32768 && (out + 2 * B - 1) / (2 * B) >= 4 * std::int64_t(threads)) B *= 2;
      for (auto& a : accs) a.assign(std::size_t(B) * Wd, T(0));
      auto panel = [&](auto t, auto p) {
        hisparse::multiply_panel<T, Wd, decltype(t)::value, decltype(p)::value>(g, h.pool, B, alpha, x, ldx, beta, y,
                                                                               ldy, w, xp, accs.data(), h.nnz, threads);
      };
      using yes = std::true_type;
      using no = std::false_type;
      if (trans) packed ? panel(yes{}, yes{}) : panel(yes{}, no{});
      else packed ? panel(no{}, yes{}) : panel(no{}, no{});
    };
    if (w == 1) run(std::integral_constant<int, 1>{});
    else if (w == 2) run(std::integral_constant<int, 2>{});
    else if (w <= 4) run(std::integral_constant<int, 4>{});
    else run(std::integral_constant<int, 8>{});
  }
}

}  // namespace h2expr::detail
