#pragma once
// Sparse kernels of the host space: CSR times a block of vectors, and the blocked triangular solves
// with a sparse Cholesky factor (the CSR preparation both spaces share: csr.hpp).
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/csr.hpp>

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
