#pragma once
// The HiSparse format (Derler et al., ../shared/papers/hisparse-hierarchical-sparse-gpu.txt): a sparse
// matrix as a tree of d x d nodes over a padded square of side d^levels, each node stored in the form
// that suits its own pattern, all in one pool of 16-byte aligned nodes. Shared by both spaces: the
// layout, its construction from COO entries and its decoding run on the host; the products read the
// pool in either space (host/hisparse.hpp, cuda/hisparse.cuh).
//
// A node is addressed by a 32-bit reference: its byte offset in the pool (a multiple of 16) with its
// kind in the low 4 bits (the paper's tagged pointers; 0 is "no node"). The kinds:
//   coo1, coo2, coo4  nnz (uint32), then nnz (row, column) pairs of 1, 2 or 4 bytes each, local to the
//                     node (the narrowest width that spans it: 1 byte for a leaf, d <= 256), then the
//                     nnz values; at any level, since a scattered pattern is cheaper as one node with
//                     2-byte coordinates than as a tree of single-entry leaves
//   dense_leaf        d x d values, row-major (a leaf only)
//   sparse_inner      k (uint32), k child coordinates (row << 8 | column, uint16), k references
//   dense_inner       d x d references, row-major, 0 where a child is empty
// Entries of a COO node and the children of a sparse inner node are kept in Morton (Z) order of their
// d x d blocks (row-major inside a block), so that every aligned square of side d * 2^k inside a node
// is a contiguous range, found by binary search: the products use this to cut a node into bands of
// rows (or of columns, for the transposed product) without a second copy or an index.
//
// Each node's form is the cheapest in bytes, decided bottom-up over the whole tree (a node becomes COO
// when that costs no more than its subtree). Construction: the entries are sorted once by the Morton
// key, so that every node at every level is a contiguous range of them (the paper's top-down binning),
// then the nodes are written children first (its bottom-up filling).
#include <h2expr/detail/primitives/kernels.hpp>  // H2EXPR_HOST_DEVICE

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace h2expr::detail::hisparse {

enum kind : std::uint32_t { none = 0, coo1 = 1, coo2 = 2, coo4 = 3, dense_leaf = 4, sparse_inner = 5, dense_inner = 6 };

using ref = std::uint32_t;
H2EXPR_HOST_DEVICE inline unsigned kind_of(ref r) { return r & 15u; }
H2EXPR_HOST_DEVICE inline std::size_t offset_of(ref r) { return std::size_t(r & ~15u); }
H2EXPR_HOST_DEVICE inline int coordinate_bytes(unsigned k) { return k == coo1 ? 1 : k == coo2 ? 2 : 4; }
H2EXPR_HOST_DEVICE inline bool is_coo(unsigned k) { return k >= coo1 && k <= coo4; }

// The tree's shape: node size d = 2^log_d (2 <= d <= 256) and levels such that d^levels covers the
// matrix; a node at level l (the root is level 0) has side 2^(log_d * (levels - l)).
struct geometry {
  std::int64_t rows = 0, cols = 0;
  int log_d = 8, levels = 1;
  ref root = 0;
  H2EXPR_HOST_DEVICE int d() const { return 1 << log_d; }
  H2EXPR_HOST_DEVICE int log_side(int level) const { return log_d * (levels - level); }
};

// Bits of x spread to the even bit positions (the Morton interleave).
H2EXPR_HOST_DEVICE inline std::uint64_t spread(std::uint32_t x) {
  std::uint64_t v = x;
  v = (v | (v << 16)) & 0x0000FFFF0000FFFFull;
  v = (v | (v << 8)) & 0x00FF00FF00FF00FFull;
  v = (v | (v << 4)) & 0x0F0F0F0F0F0F0F0Full;
  v = (v | (v << 2)) & 0x3333333333333333ull;
  v = (v | (v << 1)) & 0x5555555555555555ull;
  return v;
}
H2EXPR_HOST_DEVICE inline std::uint64_t morton(std::uint32_t r, std::uint32_t c) { return spread(r) << 1 | spread(c); }
// The order of entries: Morton order of d x d blocks, row-major inside a block. With coordinates below
// 2^32 and d >= 2 it fits 64 bits.
H2EXPR_HOST_DEVICE inline std::uint64_t entry_key(std::uint32_t r, std::uint32_t c, int log_d) {
  const std::uint32_t m = (1u << log_d) - 1u;
  return morton(r >> log_d, c >> log_d) << (2 * log_d) | std::uint64_t(r & m) << log_d | (c & m);
}

// Byte layouts.
template <class T>
H2EXPR_HOST_DEVICE inline std::size_t coo_values_offset(std::size_t nnz, int width) {
  const std::size_t end = 4 + 2 * std::size_t(width) * nnz;
  return (end + sizeof(T) - 1) / sizeof(T) * sizeof(T);
}
H2EXPR_HOST_DEVICE inline std::size_t inner_refs_offset(std::size_t k) { return (4 + 2 * k + 3) / 4 * 4; }
inline std::size_t align16(std::size_t n) { return (n + 15) / 16 * 16; }

// Reading a node (host or device code); `p` points at its first byte.
inline std::uint32_t count(const unsigned char* p) {
  std::uint32_t n;
  std::memcpy(&n, p, 4);
  return n;
}
// Entry e's local (row, column) in a COO node of coordinate width W.
template <int W>
inline void coordinates(const unsigned char* p, std::uint32_t e, std::uint32_t& r, std::uint32_t& c) {
  const unsigned char* q = p + 4 + 2 * W * std::size_t(e);
  if constexpr (W == 1) {
    r = q[0], c = q[1];
  } else if constexpr (W == 2) {
    std::uint16_t x[2];
    std::memcpy(x, q, 4);
    r = x[0], c = x[1];
  } else {
    std::memcpy(&r, q, 4);
    std::memcpy(&c, q + 4, 4);
  }
}
inline std::uint16_t child_position(const unsigned char* p, std::uint32_t i) {
  std::uint16_t x;
  std::memcpy(&x, p + 4 + 2 * std::size_t(i), 2);
  return x;
}
inline ref child_ref(const unsigned char* p, std::uint32_t k, std::uint32_t i) {
  ref x;
  std::memcpy(&x, p + inner_refs_offset(k) + 4 * std::size_t(i), 4);
  return x;
}

// The first entry of a COO node (width W, n entries) whose key is >= key (entries are sorted by key).
template <int W>
inline std::uint32_t lower_entry(const unsigned char* p, std::uint32_t n, std::uint64_t key, int log_d) {
  std::uint32_t lo = 0, hi = n;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    std::uint32_t r, c;
    coordinates<W>(p, mid, r, c);
    if (entry_key(r, c, log_d) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
// The first child of a sparse inner node (k children) whose Morton position is >= key.
inline std::uint32_t lower_child(const unsigned char* p, std::uint32_t k, std::uint64_t key) {
  std::uint32_t lo = 0, hi = k;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    const std::uint16_t x = child_position(p, mid);
    if (morton(x >> 8, x & 255u) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// What a product reads: the tree's shape and its pool in the space, and (CUDA space only) the queues
// of node chunks its kernels run over.
struct chunk {
  std::int64_t row0, col0;  // the node's origin
  std::uint32_t node;       // its reference
  std::uint32_t first;      // its first entry (COO) in this chunk
  std::uint32_t count;      // entries in this chunk (COO); 0 for a dense leaf
  std::uint32_t unused = 0;
};
struct tree_view {
  geometry g;
  const unsigned char* pool = nullptr;
  const chunk* coo = nullptr;  // COO chunks of at most chunk_entries entries
  const chunk* dense = nullptr;  // one per dense leaf
  std::int64_t coo_count = 0, dense_count = 0;
  std::int64_t nnz = 0;  // entries stored
};
inline constexpr std::uint32_t chunk_entries = 256;

// COO entries in host memory (global coordinates), the input of construction and output of decoding.
template <class T>
struct triplets {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint32_t> row, col;
  std::vector<T> val;
};

// The smallest number of levels with d^levels >= max(rows, cols) (at least 1).
inline int levels_for(std::int64_t rows, std::int64_t cols, int log_d) {
  const std::int64_t n = std::max<std::int64_t>({rows, cols, 1});
  int levels = 1;
  while (log_d * levels < 63 && (std::int64_t(1) << (log_d * levels)) < n) ++levels;
  return levels;
}

// A built matrix: its shape and the pool of nodes (host memory).
struct built {
  geometry g;
  std::vector<unsigned char> pool;
};

// Sorts t's entries by entry_key and sums the entries at one (row, column) (in the order given, so the
// result does not depend on the sort): the form build() takes.
template <class T>
void canonicalize(triplets<T>& t, int log_d) {
  const std::size_t n = t.val.size();
  std::vector<std::pair<std::uint64_t, std::size_t>> order(n);
  for (std::size_t e = 0; e < n; ++e) order[e] = {entry_key(t.row[e], t.col[e], log_d), e};
  std::sort(order.begin(), order.end());
  triplets<T> u;
  u.rows = t.rows;
  u.cols = t.cols;
  u.row.reserve(n), u.col.reserve(n), u.val.reserve(n);
  for (std::size_t x = 0; x < n; ++x) {
    const std::size_t e = order[x].second;
    if (x > 0 && order[x].first == order[x - 1].first) {
      u.val.back() += t.val[e];
    } else {
      u.row.push_back(t.row[e]);
      u.col.push_back(t.col[e]);
      u.val.push_back(t.val[e]);
    }
  }
  t = std::move(u);
}

// The tree of t's entries (canonical: canonicalize() with the same log_d; rows, cols <= 2^31) with
// nodes of side 2^log_d. Throws std::length_error when the pool would pass the 4 GiB that 32-bit
// references address.
template <class T>
built build(const triplets<T>& t, int log_d) {
  built b;
  b.g.rows = t.rows;
  b.g.cols = t.cols;
  b.g.log_d = log_d;
  b.g.levels = levels_for(t.rows, t.cols, log_d);
  const std::size_t n = t.val.size();
  if (n == 0) return b;
  const int d = 1 << log_d;
  // The plan: every node of the tree, children stored contiguously after a node's own index.
  struct plan {
    std::size_t a, b;                // its entries, t's a .. b
    std::uint64_t cost;              // bytes of its subtree in the chosen form
    std::uint32_t row0, col0;        // its origin
    std::uint32_t first = 0, kids = 0;  // its children in the plan (inner nodes)
    std::uint16_t position = 0;      // its place in its parent, row << 8 | column
    unsigned form = none;
  };
  std::vector<plan> plans;
  plans.reserve(n / 4 + 16);
  auto coo_cost = [&](std::size_t m, int width) {
    return align16(coo_values_offset<T>(m, width) + m * sizeof(T));
  };
  // Plans the node plans[i] at `level` (its children appended first), choosing its form.
  auto plan_node = [&](auto&& self, std::size_t i, int level) -> void {
    const std::size_t a = plans[i].a, e = plans[i].b, m = e - a;
    const int log_side = b.g.log_side(level);
    const int width = log_side <= 8 ? 1 : log_side <= 16 ? 2 : 4;
    const std::uint64_t as_coo = coo_cost(m, width);
    if (level == b.g.levels - 1) {  // a leaf: COO or dense
      const std::uint64_t as_dense = align16(std::size_t(d) * d * sizeof(T));
      plans[i].form = as_dense < as_coo ? dense_leaf : coo1;
      plans[i].cost = std::min(as_dense, as_coo);
      return;
    }
    const int child_shift = log_side - log_d;
    const std::size_t first = plans.size();
    std::uint32_t kids = 0;
    for (std::size_t x = a; x < e;) {  // runs of one child (contiguous in key order)
      const std::uint32_t r = t.row[x], c = t.col[x];
      const std::uint32_t ci = (r >> child_shift) & std::uint32_t(d - 1), cj = (c >> child_shift) & std::uint32_t(d - 1);
      std::size_t y = x + 1;
      while (y < e && ((t.row[y] >> child_shift) & std::uint32_t(d - 1)) == ci &&
             ((t.col[y] >> child_shift) & std::uint32_t(d - 1)) == cj)
        ++y;
      plan p{x, y, 0, plans[i].row0 + (ci << child_shift), plans[i].col0 + (cj << child_shift)};
      p.position = std::uint16_t(ci << 8 | cj);
      plans.push_back(p);
      ++kids;
      x = y;
    }
    plans[i].first = std::uint32_t(first);
    plans[i].kids = kids;
    std::uint64_t subtree = 0;
    for (std::uint32_t k = 0; k < kids; ++k) {
      self(self, first + k, level + 1);
      subtree += plans[first + k].cost;
    }
    const std::uint64_t sparse = align16(inner_refs_offset(kids) + 4 * std::size_t(kids));
    const std::uint64_t dense = align16(std::size_t(d) * d * 4);
    const std::uint64_t as_inner = subtree + std::min(sparse, dense);
    if (as_coo <= as_inner) {
      plans[i].form = width == 1 ? coo1 : width == 2 ? coo2 : coo4;
      plans[i].cost = as_coo;
      plans.resize(first);  // its children are not needed (the last ones appended)
      plans[i].kids = 0;
    } else {
      plans[i].form = sparse <= dense ? sparse_inner : dense_inner;
      plans[i].cost = as_inner;
    }
  };
  plans.push_back(plan{0, n, 0, 0, 0});
  plan_node(plan_node, 0, 0);
  if (plans[0].cost > std::uint64_t(0xFFFFFFF0u))
    throw std::length_error("hisparse: the nodes take " + std::to_string(plans[0].cost) +
                            " bytes, past the 4 GiB that 32-bit node references address");
  b.pool.assign(std::size_t(plans[0].cost), 0);

  // Writes plans[i] and its subtree from byte `at` on, children first (a parent refers to them);
  // returns its reference. A plan's cost covers its subtree; its own bytes are what its children's
  // costs leave.
  std::size_t at = 0;
  auto own_bytes = [&](const plan& p) -> std::size_t {
    std::uint64_t own = p.cost;
    for (std::uint32_t k = 0; k < p.kids; ++k) own -= plans[p.first + k].cost;
    return std::size_t(own);
  };
  auto emit = [&](auto&& self, std::size_t i) -> ref {
    const plan p = plans[i];
    std::vector<ref> kids(p.kids);
    for (std::uint32_t k = 0; k < p.kids; ++k) kids[k] = self(self, p.first + k);
    const std::size_t here = at;
    unsigned char* q = b.pool.data() + here;
    const std::size_t m = p.b - p.a;
    if (is_coo(p.form)) {
      const int width = coordinate_bytes(p.form);
      const std::uint32_t m32 = std::uint32_t(m);
      std::memcpy(q, &m32, 4);
      unsigned char* values = q + coo_values_offset<T>(m, width);
      for (std::size_t x = 0; x < m; ++x) {
        const std::size_t e = p.a + x;
        const std::uint32_t r = t.row[e] - p.row0, c = t.col[e] - p.col0;
        unsigned char* s = q + 4 + 2 * std::size_t(width) * x;
        if (width == 1) {
          s[0] = (unsigned char)r, s[1] = (unsigned char)c;
        } else if (width == 2) {
          const std::uint16_t v[2] = {std::uint16_t(r), std::uint16_t(c)};
          std::memcpy(s, v, 4);
        } else {
          std::memcpy(s, &r, 4);
          std::memcpy(s + 4, &c, 4);
        }
        std::memcpy(values + x * sizeof(T), &t.val[e], sizeof(T));
      }
    } else if (p.form == dense_leaf) {
      for (std::size_t x = p.a; x < p.b; ++x) {
        const std::size_t e = x;
        std::memcpy(q + (std::size_t(t.row[e] - p.row0) * d + (t.col[e] - p.col0)) * sizeof(T), &t.val[e], sizeof(T));
      }
    } else if (p.form == sparse_inner) {
      const std::uint32_t k = p.kids;
      std::memcpy(q, &k, 4);
      for (std::uint32_t x = 0; x < k; ++x) {
        std::memcpy(q + 4 + 2 * std::size_t(x), &plans[p.first + x].position, 2);
        std::memcpy(q + inner_refs_offset(k) + 4 * std::size_t(x), &kids[x], 4);
      }
    } else {  // dense_inner
      for (std::uint32_t x = 0; x < p.kids; ++x) {
        const std::uint16_t pos = plans[p.first + x].position;
        std::memcpy(q + 4 * (std::size_t(pos >> 8) * d + (pos & 255u)), &kids[x], 4);
      }
    }
    at += own_bytes(p);
    return ref(here) | ref(p.form);
  };
  b.g.root = emit(emit, 0);
  return b;
}

// Calls f(reference, node bytes, level, row0, col0) for every node of the tree, parents first. `pool`
// is host memory.
template <class F>
void for_each_node(const geometry& g, const unsigned char* pool, F&& f) {
  const int d = g.d();
  auto visit = [&](auto&& self, ref x, int level, std::int64_t r0, std::int64_t c0) -> void {
    const unsigned k = kind_of(x);
    if (k == none) return;
    const unsigned char* p = pool + offset_of(x);
    f(x, p, level, r0, c0);
    const int shift = g.log_side(level) - g.log_d;
    if (k == sparse_inner) {
      const std::uint32_t n = count(p);
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint16_t pos = child_position(p, i);
        self(self, child_ref(p, n, i), level + 1, r0 + (std::int64_t(pos >> 8) << shift),
             c0 + (std::int64_t(pos & 255u) << shift));
      }
    } else if (k == dense_inner) {
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) {
          ref y;
          std::memcpy(&y, p + 4 * (std::size_t(i) * d + std::size_t(j)), 4);
          self(self, y, level + 1, r0 + (std::int64_t(i) << shift), c0 + (std::int64_t(j) << shift));
        }
    }
  };
  visit(visit, g.root, 0, 0, 0);
}

// Calls f(row, col, value) for every stored entry of the tree (global coordinates, dense leaves' zeros
// skipped), in key order. `pool` is host memory.
template <class T, class F>
void for_each_entry(const geometry& g, const unsigned char* pool, F&& f) {
  const int d = g.d();
  for_each_node(g, pool, [&](ref x, const unsigned char* p, int, std::int64_t r0, std::int64_t c0) {
    const unsigned k = kind_of(x);
    if (is_coo(k)) {
      const std::uint32_t n = count(p);
      const int width = coordinate_bytes(k);
      const unsigned char* values = p + coo_values_offset<T>(n, width);
      for (std::uint32_t e = 0; e < n; ++e) {
        std::uint32_t r, c;
        if (width == 1) coordinates<1>(p, e, r, c);
        else if (width == 2) coordinates<2>(p, e, r, c);
        else coordinates<4>(p, e, r, c);
        T v;
        std::memcpy(&v, values + e * sizeof(T), sizeof(T));
        f(r0 + r, c0 + c, v);
      }
    } else if (k == dense_leaf) {
      const std::int64_t mi = std::min<std::int64_t>(d, g.rows - r0), mj = std::min<std::int64_t>(d, g.cols - c0);
      for (std::int64_t i = 0; i < mi; ++i)
        for (std::int64_t j = 0; j < mj; ++j) {
          T v;
          std::memcpy(&v, p + (std::size_t(i) * d + std::size_t(j)) * sizeof(T), sizeof(T));
          if (v != T(0)) f(r0 + i, c0 + j, v);
        }
    }
  });
}

// The queues of the CUDA space's kernels (the paper's queues per node type and size, built once):
// every COO node cut into chunks of at most chunk_entries entries, and the dense leaves.
inline void make_queues(const geometry& g, const unsigned char* pool, std::vector<chunk>& coo,
                        std::vector<chunk>& dense) {
  for_each_node(g, pool, [&](ref x, const unsigned char* p, int, std::int64_t r0, std::int64_t c0) {
    if (is_coo(kind_of(x))) {
      const std::uint32_t n = count(p);
      for (std::uint32_t e = 0; e < n; e += chunk_entries)
        coo.push_back(chunk{r0, c0, x, e, std::min(chunk_entries, n - e)});
    } else if (kind_of(x) == dense_leaf) {
      dense.push_back(chunk{r0, c0, x, 0, 0});
    }
  });
}

// How many nodes of each kind the tree holds (index: kind).
inline std::vector<std::size_t> node_counts(const geometry& g, const unsigned char* pool) {
  std::vector<std::size_t> n(7, 0);
  for_each_node(g, pool, [&](ref x, const unsigned char*, int, std::int64_t, std::int64_t) { ++n[kind_of(x)]; });
  return n;
}

}  // namespace h2expr::detail::hisparse
