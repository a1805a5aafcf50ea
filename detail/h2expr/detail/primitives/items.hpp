#pragma once
// Batched work described item by item on the host (sizes and offsets into one array each), for the
// levels of an H2 matrix whose nodes may differ in rank. When the items share their shape and their
// offsets advance by fixed strides (a level of uniform rank) a gemm is one strided batch, with no
// marshaling; otherwise the sizes and offsets go to the space in one upload and a variable-size
// batch runs (the per-node ranks of a compressed matrix: the paper's "future work" of section 3).
// Nothing here waits for the space: the marshaled arrays are freed in stream order after the batch.
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/detail/core/buffer.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

struct item_gemm {  // C(c) = alpha op(A(a)) op(B(b)) + beta C(c), m x n, inner dimension k
  int m, n, k;
  std::int64_t a, b, c;
  int lda, ldb, ldc;
};

struct item_trsm {  // B(b) := alpha op(A(a))^{-1} B(b) (side::left) or alpha B(b) op(A(a))^{-1}, B m x n
  int m, n;
  std::int64_t a, b;
  int lda, ldb;
};

struct item_copy {  // dst(d) = op(src(s)), rows x cols (src: cols x rows when transposed)
  int rows, cols;
  std::int64_t s, d;
  int lds, ldd;
};

namespace items_detail {
// Pointer arrays base_j + offsets[j][i] and the int columns sizes[j][i], in the space, from one
// upload each.
template <class T, class Space>
struct marshaled {
  buffer<int, Space> sizes;
  buffer<T*, Space> ptr;
  marshaled(const context_ptr<Space>& ctx, const std::vector<int>& s, const std::vector<std::int64_t>& offsets,
            const std::vector<T*>& bases)
      : sizes(ctx, s), ptr(ctx, offsets.size()) {
    buffer<std::int64_t, Space> off(ctx, offsets);
    const int count = int(offsets.size() / bases.size());
    for (std::size_t j = 0; j < bases.size(); ++j)
      marshal_offsets(*ctx, bases[j], off.data() + j * count, count, ptr.data() + j * count);
  }
};
}  // namespace items_detail

template <class T, class Space>
void gemm_items(const context_ptr<Space>& ctx, op ta, op tb, T alpha, const T* A, const T* B, T beta, T* C,
                std::vector<item_gemm> items) {
  std::erase_if(items, [](const item_gemm& g) { return g.m == 0 || g.n == 0; });
  const int count = int(items.size());
  if (count == 0) return;
  const item_gemm& f = items[0];
  const std::int64_t sa = count > 1 ? items[1].a - f.a : 0, sb = count > 1 ? items[1].b - f.b : 0,
                     sc = count > 1 ? items[1].c - f.c : 0;
  bool strided = true;
  for (int i = 0; i < count && strided; ++i) {
    const item_gemm& g = items[i];
    strided = g.m == f.m && g.n == f.n && g.k == f.k && g.lda == f.lda && g.ldb == f.ldb && g.ldc == f.ldc &&
              g.a == f.a + i * sa && g.b == f.b + i * sb && g.c == f.c + i * sc;
  }
  if (strided) {
    gemm_strided_batched(*ctx, ta, tb, f.m, f.n, f.k, alpha, A + f.a, f.lda, sa, B + f.b, f.ldb, sb, beta, C + f.c,
                         f.ldc, sc, count);
    return;
  }
  std::vector<int> s(std::size_t(6) * count);
  std::vector<std::int64_t> o(std::size_t(3) * count);
  int max_m = 0, max_n = 0, max_k = 0;
  for (int i = 0; i < count; ++i) {
    const item_gemm& g = items[i];
    s[i] = g.m, s[count + i] = g.n, s[2 * count + i] = g.k;
    s[3 * count + i] = g.lda, s[4 * count + i] = g.ldb, s[5 * count + i] = g.ldc;
    o[i] = g.a, o[count + i] = g.b, o[2 * count + i] = g.c;
    max_m = std::max(max_m, g.m), max_n = std::max(max_n, g.n), max_k = std::max(max_k, g.k);
  }
  items_detail::marshaled<T, Space> mk(ctx, s, o, {const_cast<T*>(A), const_cast<T*>(B), C});
  const int* sz = mk.sizes.data();
  T* const* p = mk.ptr.data();
  gemm_vbatched(*ctx, ta, tb, sz, sz + count, sz + 2 * count, alpha, (const T* const*)p, sz + 3 * count,
                (const T* const*)(p + count), sz + 4 * count, beta, p + 2 * count, sz + 5 * count, count, max_m, max_n,
                max_k);
}

template <class T, class Space>
void copy_items(const context_ptr<Space>& ctx, const T* src, T* dst, std::vector<item_copy> items, op trans = op::none) {
  std::erase_if(items, [](const item_copy& c) { return c.rows == 0 || c.cols == 0; });
  const int count = int(items.size());
  if (count == 0) return;
  std::vector<int> s(std::size_t(4) * count);
  std::vector<std::int64_t> o(std::size_t(2) * count);
  for (int i = 0; i < count; ++i) {
    const item_copy& c = items[i];
    s[i] = c.rows, s[count + i] = c.cols, s[2 * count + i] = c.lds, s[3 * count + i] = c.ldd;
    o[i] = c.s, o[count + i] = c.d;
  }
  items_detail::marshaled<T, Space> mk(ctx, s, o, {const_cast<T*>(src), dst});
  const int* sz = mk.sizes.data();
  T* const* p = mk.ptr.data();
  copy_vbatched(*ctx, trans, sz, sz + count, (const T* const*)p, sz + 2 * count, p + count, sz + 3 * count, count);
}

// In-place thin QRs (qr_vbatched) of the items at A + ao[i] (m[i] x n[i], ld lda), R at R + ro[i]
// (ld ldr), from one upload of sizes and offsets.
template <class T, class Space>
void qr_items(const context_ptr<Space>& ctx, T* A, const std::vector<std::int64_t>& ao, const std::vector<int>& m,
              const std::vector<int>& n, int lda, T* R, const std::vector<std::int64_t>& ro, int ldr) {
  if (ao.empty()) return;
  const int count = int(ao.size());
  std::vector<std::int64_t> o(ao);
  o.insert(o.end(), ro.begin(), ro.end());
  std::vector<int> s(m);
  s.insert(s.end(), n.begin(), n.end());
  s.insert(s.end(), std::size_t(count), lda);
  s.insert(s.end(), std::size_t(count), ldr);
  items_detail::marshaled<T, Space> mk(ctx, s, o, {A, R});
  const int* sz = mk.sizes.data();
  qr_vbatched(*ctx, sz, sz + count, mk.ptr.data(), sz + 2 * count, mk.ptr.data() + count, sz + 3 * count, count,
              *std::max_element(m.begin(), m.end()), *std::max_element(n.begin(), n.end()));
}

template <class T, class Space>
void trsm_items(const context_ptr<Space>& ctx, side sd, uplo ul, op ta, diag dg, T alpha, const T* A, T* B,
                std::vector<item_trsm> items) {
  std::erase_if(items, [](const item_trsm& t) { return t.m == 0 || t.n == 0; });
  const int count = int(items.size());
  if (count == 0) return;
  std::vector<int> s(std::size_t(4) * count);
  std::vector<std::int64_t> o(std::size_t(2) * count);
  int max_m = 0, max_n = 0;
  for (int i = 0; i < count; ++i) {
    const item_trsm& t = items[i];
    s[i] = t.m, s[count + i] = t.n, s[2 * count + i] = t.lda, s[3 * count + i] = t.ldb;
    o[i] = t.a, o[count + i] = t.b;
    max_m = std::max(max_m, t.m), max_n = std::max(max_n, t.n);
  }
  items_detail::marshaled<T, Space> mk(ctx, s, o, {const_cast<T*>(A), B});
  const int* sz = mk.sizes.data();
  T* const* p = mk.ptr.data();
  trsm_vbatched(*ctx, sd, ul, ta, dg, sz, sz + count, alpha, (const T* const*)p, sz + 2 * count, p + count,
                sz + 3 * count, count, max_m, max_n);
}

// In-place lower Cholesky factors (potrf_vbatched) of the n[i] x n[i] items at A + ao[i] (ld lda).
// Returns the first item whose factorization failed, or -1.
template <class T, class Space>
int potrf_items(const context_ptr<Space>& ctx, T* A, const std::vector<std::int64_t>& ao, const std::vector<int>& n,
                int lda) {
  if (ao.empty()) return -1;
  const int count = int(ao.size());
  std::vector<int> s(n);
  s.insert(s.end(), std::size_t(count), lda);
  items_detail::marshaled<T, Space> mk(ctx, s, ao, {A});
  buffer<int, Space> info(ctx, std::size_t(count));
  potrf_vbatched(*ctx, mk.sizes.data(), mk.ptr.data(), mk.sizes.data() + count, info.data(), count,
                 *std::max_element(n.begin(), n.end()));
  const auto h = info.to_host();  // (waits for the factorizations)
  for (int i = 0; i < count; ++i)
    if (h[i] != 0) return i;
  return -1;
}

}  // namespace h2expr::detail
