#pragma once
// Sparse kernels of the host space: CSR times a block of vectors, and the blocked triangular solves
// with a sparse Cholesky factor. Also the host-side CSR preparation both spaces share (sorting,
// transposition, exact comparison), since sparse matrices always arrive as host arrays.
#include <h2expr/detail/host/context.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace h2expr::detail {

// A CSR matrix in ordinary host memory, rows sorted by column, no duplicates.
template <class T>
struct host_csr {
  std::int64_t rows = 0, cols = 0;
  std::vector<int> ptr{0}, idx;
  std::vector<T> val;
  std::int64_t nnz() const { return std::int64_t(idx.size()); }
};

// The canonical CSR of (row_ptr, col_idx, values), already checked for shape and range: columns
// sorted within each row and duplicate entries summed (the usual assembly convention).
template <class T>
host_csr<T> canonical_csr(std::int64_t rows, std::int64_t cols, const std::vector<int>& row_ptr,
                          const std::vector<int>& col_idx, const std::vector<T>& values) {
  host_csr<T> a;
  a.rows = rows;
  a.cols = cols;
  bool canonical = true;
  for (std::int64_t r = 0; r < rows && canonical; ++r)
    for (int e = row_ptr[r] + 1; e < row_ptr[r + 1]; ++e)
      if (col_idx[e] <= col_idx[e - 1]) {
        canonical = false;
        break;
      }
  if (canonical) {  // the common case: the arrays are kept as they are
    a.ptr = row_ptr;
    a.idx = col_idx;
    a.val = values;
    return a;
  }
  a.ptr.assign(std::size_t(rows) + 1, 0);
  a.idx.reserve(col_idx.size());
  a.val.reserve(values.size());
  std::vector<int> order;
  for (std::int64_t r = 0; r < rows; ++r) {
    order.resize(std::size_t(row_ptr[r + 1] - row_ptr[r]));
    std::iota(order.begin(), order.end(), row_ptr[r]);
    // Stable, so duplicates are summed in the order given: the result does not depend on the sort.
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return col_idx[x] < col_idx[y]; });
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int e = order[i];
      if (i > 0 && col_idx[e] == a.idx.back()) a.val.back() += values[e];
      else {
        a.idx.push_back(col_idx[e]);
        a.val.push_back(values[e]);
      }
    }
    a.ptr[r + 1] = int(a.idx.size());
  }
  return a;
}

// A^T as CSR (a counting sort by column, so its rows come out sorted).
template <class T>
host_csr<T> transposed(const host_csr<T>& a) {
  host_csr<T> t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.ptr.assign(std::size_t(a.cols) + 1, 0);
  t.idx.resize(a.idx.size());
  t.val.resize(a.val.size());
  for (int c : a.idx) ++t.ptr[std::size_t(c) + 1];
  for (std::int64_t c = 0; c < a.cols; ++c) t.ptr[c + 1] += t.ptr[c];
  std::vector<int> next(t.ptr.begin(), t.ptr.end() - 1);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (int e = a.ptr[r]; e < a.ptr[r + 1]; ++e) {
      const int p = next[a.idx[e]]++;
      t.idx[p] = int(r);
      t.val[p] = a.val[e];
    }
  return t;
}

// Exact equality of canonical CSR arrays (values by ==, so 0 and -0 are equal).
template <class T>
bool same_csr(std::int64_t rows, std::int64_t cols, const int* aptr, const int* aidx, const T* aval,
              std::int64_t brows, std::int64_t bcols, const int* bptr, const int* bidx, const T* bval) {
  if (rows != brows || cols != bcols) return false;
  if (!std::equal(aptr, aptr + rows + 1, bptr)) return false;
  const std::int64_t nnz = aptr[rows];
  return std::equal(aidx, aidx + nnz, bidx) && std::equal(aval, aval + nnz, bval);
}
template <class T>
bool same_csr(const host_csr<T>& a, const host_csr<T>& b) {
  return same_csr(a.rows, a.cols, a.ptr.data(), a.idx.data(), a.val.data(), b.rows, b.cols, b.ptr.data(),
                  b.idx.data(), b.val.data());
}

// A hash of the canonical arrays, equal for equal matrices (-0 hashed as 0): comparing hashes first
// makes a negative is_transpose_of cheap on any space.
template <class T>
std::uint64_t fingerprint(const host_csr<T>& a) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  };
  mix(std::uint64_t(a.rows));
  mix(std::uint64_t(a.cols));
  for (int p : a.ptr) mix(std::uint64_t(std::uint32_t(p)));
  for (int c : a.idx) mix(std::uint64_t(std::uint32_t(c)));
  for (T v : a.val) {
    const T x = v == T(0) ? T(0) : v;
    std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t> bits;
    std::memcpy(&bits, &x, sizeof(T));
    mix(std::uint64_t(bits));
  }
  return h;
}

// Y(0:rows, 0:nv) = alpha A X + beta Y for a CSR A (beta == 0 does not read Y). Rows in parallel;
// each row is applied to 8 vectors at a time, so its entries are read once per 8 vectors and the
// 8 sums are independent.
template <class T>
void csr_multiply(context<host>&, std::int64_t rows, std::int64_t /*cols*/, std::int64_t nnz, const int* ptr,
                  const int* idx, const T* val, T alpha, const T* X, std::int64_t ldx, T beta, T* Y,
                  std::int64_t ldy, int nv) {
  if (rows == 0 || nv == 0) return;
  constexpr int V = 8;
  // Threads only where the work pays for starting them.
  [[maybe_unused]] const bool parallel = (nnz + rows) * std::int64_t(nv) > 32768;
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t r = 0; r < rows; ++r) {
    const int e0 = ptr[r], e1 = ptr[r + 1];
    for (int v0 = 0; v0 < nv; v0 += V) {
      const int w = std::min(V, nv - v0);
      T acc[V] = {};
      const T* x = X + std::int64_t(v0) * ldx;
      for (int e = e0; e < e1; ++e) {
        const T a = val[e];
        const T* xe = x + idx[e];
        for (int v = 0; v < w; ++v) acc[v] += a * xe[v * ldx];
      }
      T* y = Y + r + std::int64_t(v0) * ldy;
      for (int v = 0; v < w; ++v) {
        T& out = y[v * ldy];
        out = beta == T(0) ? alpha * acc[v] : alpha * acc[v] + beta * out;
      }
    }
  }
}

// Calls f(std::integral_constant<int, w>) for 1 <= w <= sizeof...(Ws): a runtime panel width as a
// compile-time one, so the loops over the panel's vectors unroll and their sums stay in registers.
template <class F, int... Ws>
void with_width(int w, F&& f, std::integer_sequence<int, Ws...>) {
  (void)((w == Ws + 1 ? (f(std::integral_constant<int, Ws + 1>{}), true) : false) || ...);
}

// The factor of P S P^T = L L^T of a sparse Cholesky factorization, ready for solves in a space.
// Built from the host CSR of L^T (row j: the diagonal L_jj first, then L_ij for i > j, i.e. the
// columns of L) and src, with (P b)_j = b_src[j].
template <class T, class Space>
class cholesky_factor;

// The host factor solves a block of vectors as one: the block is permuted into a row-major workspace
// (a panel's vectors contiguous per row), and the forward and backward sweeps read each column of L
// once per panel instead of once per vector, applying it to all the panel's vectors in the inner loop.
// Panels of up to 16 vectors run on separate threads. The workspace is grown on demand and kept, so
// one factor must not be used by two threads at once.
template <class T>
class cholesky_factor<T, host> {
 public:
  static constexpr int max_panel = 16;

  cholesky_factor(context_ptr<host>, std::int64_t n, std::vector<int> src, const host_csr<T>& lt)
      : n_(n), src_(std::move(src)), ptr_(std::size_t(n) + 1, 0), inv_diag_(std::size_t(n)) {
    row_.reserve(std::size_t(lt.nnz() - n));
    val_.reserve(std::size_t(lt.nnz() - n));
    for (std::int64_t j = 0; j < n; ++j) {
      const int e0 = lt.ptr[j];
      inv_diag_[j] = T(1) / lt.val[e0];  // the caller checked that the diagonal comes first
      for (int e = e0 + 1; e < lt.ptr[j + 1]; ++e) {
        row_.push_back(lt.idx[e]);
        val_.push_back(lt.val[e]);
      }
      ptr_[j + 1] = std::int64_t(row_.size());
    }
  }

  std::size_t memory_bytes() const {
    return src_.size() * sizeof(int) + ptr_.size() * sizeof(std::int64_t) + row_.size() * sizeof(int) +
           (val_.size() + inv_diag_.size()) * sizeof(T);
  }
  std::size_t workspace_bytes() const { return workspace_.size() * sizeof(T); }

  // out = S^{-1} in for nv vectors (in and out column-major; the same block is fine).
  void solve(const T* in, std::int64_t ldi, T* out, std::int64_t ldo, int nv) {
    if (n_ == 0 || nv == 0) return;
    const int threads = context<host>::threads();
    // Panels of at most max_panel vectors; with threads to spare, more panels of at least 8 vectors.
    int panels = (nv + max_panel - 1) / max_panel;
    if (threads > panels) panels = std::max(panels, std::min(threads, nv / 8));
    const int workers = std::min(panels, threads), width = (nv + panels - 1) / panels;
    const std::size_t per_worker = std::size_t(n_) * std::size_t(width);
    if (workspace_.size() < per_worker * workers) workspace_.resize(per_worker * workers);
    auto run = [&](int p, T* x) {
      const int v0 = int(std::int64_t(p) * nv / panels), v1 = int(std::int64_t(p + 1) * nv / panels);
      with_width(
          v1 - v0,
          [&](auto w) {
            solve_panel<decltype(w)::value>(in + std::int64_t(v0) * ldi, ldi, out + std::int64_t(v0) * ldo, ldo, x);
          },
          std::make_integer_sequence<int, max_panel>{});
    };
    if (workers == 1) {
      for (int p = 0; p < panels; ++p) run(p, workspace_.data());
      return;
    }
#pragma omp parallel num_threads(workers)
    {
#if defined(_OPENMP)
      T* x = workspace_.data() + per_worker * std::size_t(omp_get_thread_num());
#else
      T* x = workspace_.data();
#endif
#pragma omp for schedule(dynamic, 1)
      for (int p = 0; p < panels; ++p) run(p, x);
    }
  }

 private:
  // W vectors: x = P in (row-major, n x W), L y = x, L^T z = y, out = P^T z. The loops over the W
  // vectors are marked simd: left alone, GCC vectorizes the forward sweep not at all and the backward
  // one over the entries of L (2x slower for float at 16 vectors).
  template <int W>
  void solve_panel(const T* in, std::int64_t ldi, T* out, std::int64_t ldo, T* x) const {
    const std::int64_t n = n_;
    const int* src = src_.data();
    const std::int64_t* ptr = ptr_.data();
    const int* row = row_.data();
    const T* val = val_.data();
    const T* inv_diag = inv_diag_.data();
    for (std::int64_t j = 0; j < n; ++j)
      for (int v = 0; v < W; ++v) x[j * W + v] = in[src[j] + v * ldi];
    // Forward, by columns of L: finish x_j, then subtract its multiples from the rows below.
    for (std::int64_t j = 0; j < n; ++j) {
      T xj[W];
      for (int v = 0; v < W; ++v) xj[v] = x[j * W + v] *= inv_diag[j];
      for (std::int64_t e = ptr[j]; e < ptr[j + 1]; ++e) {
        T* xi = x + std::int64_t(row[e]) * W;
        const T l = val[e];
#pragma omp simd
        for (int v = 0; v < W; ++v) xi[v] -= l * xj[v];
      }
    }
    // Backward, by rows of L^T (the same columns of L): x_j -= sum_{i > j} L_ij x_i, then scale.
    for (std::int64_t j = n - 1; j >= 0; --j) {
      T acc[W];
      for (int v = 0; v < W; ++v) acc[v] = x[j * W + v];
      for (std::int64_t e = ptr[j]; e < ptr[j + 1]; ++e) {
        const T* xi = x + std::int64_t(row[e]) * W;
        const T l = val[e];
#pragma omp simd
        for (int v = 0; v < W; ++v) acc[v] -= l * xi[v];
      }
      for (int v = 0; v < W; ++v) x[j * W + v] = acc[v] * inv_diag[j];
    }
    for (std::int64_t j = 0; j < n; ++j)
      for (int v = 0; v < W; ++v) out[src[j] + v * ldo] = x[j * W + v];
  }

  std::int64_t n_ = 0;
  std::vector<int> src_;
  std::vector<std::int64_t> ptr_;  // off-diagonal part of L by columns
  std::vector<int> row_;
  std::vector<T> val_;
  std::vector<T> inv_diag_;
  std::vector<T> workspace_;
};

}  // namespace h2expr::detail
