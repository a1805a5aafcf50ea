#pragma once
// Batched work described item by item as offsets into one array per operand (sizes, offsets, leading
// dimensions), for the levels of an H2 matrix whose nodes may differ in rank: each call describes its
// operands as batches (batch.hpp), which pick a strided, fixed-size or variable-size kernel (the
// per-node ranks of a compressed matrix: the paper's "future work" of section 3). Items with no
// entries are dropped. Nothing here waits for the space.
#include <h2expr/detail/primitives/batch.hpp>

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

template <class T, class Space>
void gemm_items(const context_ptr<Space>& ctx, op ta, op tb, T alpha, const T* A, const T* B, T beta, T* C,
                std::vector<item_gemm> items) {
  std::erase_if(items, [](const item_gemm& g) { return g.m == 0 || g.n == 0; });
  batch<const T, Space> a(ctx), b(ctx);
  batch<T, Space> c(ctx);
  a.reserve(int(items.size())), b.reserve(int(items.size())), c.reserve(int(items.size()));
  const bool at = ta != op::none, bt = tb != op::none;
  for (const item_gemm& g : items) {
    a.add(A + g.a, at ? g.k : g.m, at ? g.m : g.k, g.lda);
    b.add(B + g.b, bt ? g.n : g.k, bt ? g.k : g.n, g.ldb);
    c.add(C + g.c, g.m, g.n, g.ldc);
  }
  gemm(ta, tb, alpha, a, b, beta, c);
}

template <class T, class Space>
void copy_items(const context_ptr<Space>& ctx, const T* src, T* dst, std::vector<item_copy> items, op trans = op::none) {
  std::erase_if(items, [](const item_copy& c) { return c.rows == 0 || c.cols == 0; });
  batch<const T, Space> s(ctx);
  batch<T, Space> d(ctx);
  s.reserve(int(items.size())), d.reserve(int(items.size()));
  const bool t = trans != op::none;
  for (const item_copy& c : items) {
    s.add(src + c.s, t ? c.cols : c.rows, t ? c.rows : c.cols, c.lds);
    d.add(dst + c.d, c.rows, c.cols, c.ldd);
  }
  copy(s, d, trans);
}

// In-place thin QRs of the items at A + ao[i] (m[i] x n[i], ld lda), R at R + ro[i] (ld ldr).
template <class T, class Space>
void qr_items(const context_ptr<Space>& ctx, T* A, const std::vector<std::int64_t>& ao, const std::vector<int>& m,
              const std::vector<int>& n, int lda, T* R, const std::vector<std::int64_t>& ro, int ldr) {
  batch<T, Space> a(ctx), r(ctx);
  for (std::size_t i = 0; i < ao.size(); ++i)
    a.add(A + ao[i], m[i], n[i], lda), r.add(R + ro[i], std::min(m[i], n[i]), n[i], ldr);
  qr(a, &r);
}

template <class T, class Space>
void trsm_items(const context_ptr<Space>& ctx, side sd, uplo ul, op ta, diag dg, T alpha, const T* A, T* B,
                std::vector<item_trsm> items) {
  std::erase_if(items, [](const item_trsm& t) { return t.m == 0 || t.n == 0; });
  batch<const T, Space> a(ctx);
  batch<T, Space> b(ctx);
  for (const item_trsm& t : items) {
    const int k = sd == side::left ? t.m : t.n;
    a.add(A + t.a, k, k, t.lda), b.add(B + t.b, t.m, t.n, t.ldb);
  }
  trsm(sd, ul, ta, dg, alpha, a, b);
}

// In-place lower Cholesky factors of the n[i] x n[i] items at A + ao[i] (ld lda). Returns the first
// item whose factorization failed, or -1.
template <class T, class Space>
int potrf_items(const context_ptr<Space>& ctx, T* A, const std::vector<std::int64_t>& ao, const std::vector<int>& n,
                int lda) {
  batch<T, Space> a(ctx);
  for (std::size_t i = 0; i < ao.size(); ++i) a.add(A + ao[i], n[i], n[i], lda);
  return potrf(a);
}

}  // namespace h2expr::detail
