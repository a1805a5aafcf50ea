#pragma once
// One dense product on the host, C = alpha op(A) op(B) + beta C: the kernel under every host gemm
// (batched, block-sparse); and, with OpenBLAS, its LAPACK QR (used by qr.hpp) and SVD (svd.hpp). With OpenBLAS
// (H2EXPR_HAS_OPENBLAS: the build found it) the product runs in OpenBLAS's kernels, which it picks
// for the CPU at run time (AVX-512, AVX2, ...): a program built with the default flags gets the
// CPU's speed, and binaries built on one machine run on another. Without it, Eigen's product,
// vectorized for what the compile flags allow (SSE2 without -march).
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/host/eigen_map.hpp>
#include <h2expr/detail/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>
#if defined(H2EXPR_HAS_OPENBLAS)
#include <cblas.h>
// OpenBLAS carries LAPACK too; cblas.h does not declare it (these match LAPACK's own lapack.h).
extern "C" {
void sgeqrf_(const blasint* m, const blasint* n, float* a, const blasint* lda, float* tau, float* work,
             const blasint* lwork, blasint* info);
void dgeqrf_(const blasint* m, const blasint* n, double* a, const blasint* lda, double* tau, double* work,
             const blasint* lwork, blasint* info);
void sorgqr_(const blasint* m, const blasint* n, const blasint* k, float* a, const blasint* lda, const float* tau,
             float* work, const blasint* lwork, blasint* info);
void dorgqr_(const blasint* m, const blasint* n, const blasint* k, double* a, const blasint* lda, const double* tau,
             double* work, const blasint* lwork, blasint* info);
// The SVDs (the trailing lengths: gfortran's hidden lengths of the character arguments).
void sgesdd_(const char* jobz, const blasint* m, const blasint* n, float* a, const blasint* lda, float* s, float* u,
             const blasint* ldu, float* vt, const blasint* ldvt, float* work, const blasint* lwork, blasint* iwork,
             blasint* info, std::size_t jobz_len);
void dgesdd_(const char* jobz, const blasint* m, const blasint* n, double* a, const blasint* lda, double* s,
             double* u, const blasint* ldu, double* vt, const blasint* ldvt, double* work, const blasint* lwork,
             blasint* iwork, blasint* info, std::size_t jobz_len);
void sgesvd_(const char* jobu, const char* jobvt, const blasint* m, const blasint* n, float* a, const blasint* lda,
             float* s, float* u, const blasint* ldu, float* vt, const blasint* ldvt, float* work, const blasint* lwork,
             blasint* info, std::size_t jobu_len, std::size_t jobvt_len);
void dgesvd_(const char* jobu, const char* jobvt, const blasint* m, const blasint* n, double* a, const blasint* lda,
             double* s, double* u, const blasint* ldu, double* vt, const blasint* ldvt, double* work,
             const blasint* lwork, blasint* info, std::size_t jobu_len, std::size_t jobvt_len);
}
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace h2expr::detail {

template <class T>
void gemm_item(op ta, op tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B, int ldb, T beta,
               T* C, int ldc) {
  if (m == 0 || n == 0) return;
  auto c = map_block(C, m, n, ldc);
  if (k == 0 || alpha == T(0)) {
    if (beta == T(0)) c.setZero();  // BLAS semantics: C is not read when beta == 0 (it may hold NaN)
    else if (beta != T(1)) c *= beta;
    return;
  }
#if defined(H2EXPR_HAS_OPENBLAS)
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
    // BLAS rejects a leading dimension below the stored rows (with a message, not an error), while
    // a single stored column may come with any: raise those to what BLAS checks.
    const int ra = ta == op::none ? m : k, rb = tb == op::none ? k : n;
    lda = std::max(lda, ra);
    ldb = std::max(ldb, rb);
    ldc = std::max(ldc, m);
    auto call = [&](int i, int j, int p, int mc, int nc, int kc, T b) {
      const T* a = ta == op::none ? A + i + std::int64_t(p) * lda : A + p + std::int64_t(i) * lda;
      const T* bb = tb == op::none ? B + p + std::int64_t(j) * ldb : B + j + std::int64_t(p) * ldb;
      T* cc = C + i + std::int64_t(j) * ldc;
      const auto t = [](op o) { return o == op::none ? CblasNoTrans : CblasTrans; };
      if constexpr (std::is_same_v<T, double>)
        cblas_dgemm(CblasColMajor, t(ta), t(tb), mc, nc, kc, alpha, a, lda, bb, ldb, b, cc, ldc);
      else
        cblas_sgemm(CblasColMajor, t(ta), t(tb), mc, nc, kc, alpha, a, lda, bb, ldb, b, cc, ldc);
    };
    // OpenBLAS (pthreads build) runs a product above 4 * 65536 multiply-adds on its own threads. Inside
    // our parallel loops those threads would compete with the loop's for the cores (measured: 3D HGEMV
    // with 16 vectors 104 -> 166 ms). The batched products hold blas_one_thread over their loops, so
    // there OpenBLAS keeps every product on the calling thread, whole; a loop that does not (or a
    // caller's own) gets a large product issued in slices below that size (2D HGEMV's row products
    // ran 20% slower so).
    constexpr double slice = 4.0 * 65536;
    bool sliced = false;
#if defined(_OPENMP)
    sliced = omp_get_num_threads() > 1 && double(m) * n * k > slice && openblas_get_parallel() == 1 &&
             openblas_get_num_threads() > 1;
#endif
    if (!sliced) {
      call(0, 0, 0, m, n, k, beta);
      return;
    }
    const int kc = std::min(k, 256), nc = std::min(n, 64), mc = std::max(16, int(slice / (double(kc) * nc)));
    for (int j = 0; j < n; j += nc)
      for (int i = 0; i < m; i += mc)
        for (int p = 0; p < k; p += kc)
          call(i, j, p, std::min(mc, m - i), std::min(nc, n - j), std::min(kc, k - p), p == 0 ? beta : T(1));
    return;
  }
#endif
  if (beta == T(0)) c.setZero();
  else if (beta != T(1)) c *= beta;
  auto a = map_block(A, ta == op::none ? m : k, ta == op::none ? k : m, lda);
  auto b = map_block(B, tb == op::none ? k : n, tb == op::none ? n : k, ldb);
  if (ta == op::none && tb == op::none) c.noalias() += alpha * a * b;
  else if (ta == op::none) c.noalias() += alpha * a * b.transpose();
  else if (tb == op::none) c.noalias() += alpha * a.transpose() * b;
  else c.noalias() += alpha * a.transpose() * b.transpose();
}

#if defined(H2EXPR_HAS_OPENBLAS)
// Whether the host QR of an m x n item runs in LAPACK (OpenBLAS): float and double, and, inside a
// parallel loop while OpenBLAS may use its own threads (no blas_one_thread held), only items whose
// level-2 steps OpenBLAS runs on one thread (m n <= 2048 * 4, its dger threshold): its threads would
// compete with the loop's (measured: compression's tall weight stacks 4x slower). Larger items there
// stay with Eigen.
template <class T>
bool lapack_qr(int m, int n) {
  if constexpr (!std::is_same_v<T, double> && !std::is_same_v<T, float>) return false;
#if defined(_OPENMP)
  if (omp_get_num_threads() > 1 && openblas_get_parallel() == 1 && openblas_get_num_threads() > 1)
    return double(m) * n <= 8192;
#endif
  return true;
}

// Householder QR of A (m x n, ld lda) in place, LAPACK's layout: R in the upper triangle, the
// reflectors below it with their factors in tau (min(m, n) of them). work: scratch, grown as needed.
template <class T>
void lapack_geqrf(int m, int n, T* A, int lda, std::vector<T>& tau, std::vector<T>& work) {
  const blasint bm = m, bn = n, ld = std::max(lda, std::max(m, 1));
  blasint lwork = 64 * std::max<blasint>(bn, 1), info = 0;
  tau.resize(std::size_t(std::max(std::min(m, n), 1)));
  work.resize(std::size_t(lwork));
  if constexpr (std::is_same_v<T, double>) dgeqrf_(&bm, &bn, A, &ld, tau.data(), work.data(), &lwork, &info);
  else sgeqrf_(&bm, &bn, A, &ld, tau.data(), work.data(), &lwork, &info);
  require<numerical_failure>(info == 0, "QR: LAPACK geqrf rejected argument " + std::to_string(-info));
}

// After lapack_geqrf: A's first p = min(m, n) columns := Q (m x p, orthonormal columns).
template <class T>
void lapack_orgqr(int m, int n, T* A, int lda, std::vector<T>& tau, std::vector<T>& work) {
  const blasint bm = m, p = std::min(m, n), ld = std::max(lda, std::max(m, 1));
  blasint lwork = 64 * std::max<blasint>(p, 1), info = 0;
  if (p == 0) return;
  work.resize(std::size_t(lwork));
  if constexpr (std::is_same_v<T, double>) dorgqr_(&bm, &p, &p, A, &ld, tau.data(), work.data(), &lwork, &info);
  else sorgqr_(&bm, &p, &p, A, &ld, tau.data(), work.data(), &lwork, &info);
  require<numerical_failure>(info == 0, "QR: LAPACK orgqr rejected argument " + std::to_string(-info));
}

// Thin SVD of A (m x n, ld lda; not modified): U (m x p, ld m), S (p), VT (p x n, ld p), p = min(m, n).
// LAPACK's divide and conquer (gesdd), and QR iteration (gesvd) where that does not converge. False
// when neither converges.
template <class T>
bool lapack_svd(int m, int n, const T* A, int lda, T* U, T* S, T* VT) {
  const blasint bm = m, bn = n, ld = std::max(m, 1), ldu = std::max(m, 1), ldvt = std::max(std::min(m, n), 1);
  std::vector<T> a(std::size_t(m) * std::size_t(n));  // LAPACK destroys its input
  auto load = [&] {
    for (int j = 0; j < n; ++j) std::copy(A + std::int64_t(j) * lda, A + std::int64_t(j) * lda + m, a.data() + std::int64_t(j) * m);
  };
  std::vector<blasint> iwork(std::size_t(8 * std::max(std::min(m, n), 1)));
  auto run = [&](auto&& call) {  // a workspace query, then the call
    blasint lwork = -1, info = 0;
    T size = 0;
    call(&size, &lwork, &info);
    if (info != 0) return info;
    // the size comes back as a T: rounded up, as a float may hold it below the integer (LAPACK 3.12's SROUNDUP_LWORK)
    lwork = std::max<blasint>(blasint(std::ceil(double(size) * (1 + 4 * double(std::numeric_limits<T>::epsilon())))), 1);
    std::vector<T> work(static_cast<std::size_t>(lwork));
    call(work.data(), &lwork, &info);
    return info;
  };
  const char s = 'S';
  load();
  blasint info = run([&](T* work, const blasint* lwork, blasint* inf) {
    if constexpr (std::is_same_v<T, double>)
      dgesdd_(&s, &bm, &bn, a.data(), &ld, S, U, &ldu, VT, &ldvt, work, lwork, iwork.data(), inf, 1);
    else sgesdd_(&s, &bm, &bn, a.data(), &ld, S, U, &ldu, VT, &ldvt, work, lwork, iwork.data(), inf, 1);
  });
  require<numerical_failure>(info >= 0, "SVD: LAPACK gesdd rejected argument " + std::to_string(-info));
  if (info == 0) return true;
  load();
  info = run([&](T* work, const blasint* lwork, blasint* inf) {
    if constexpr (std::is_same_v<T, double>)
      dgesvd_(&s, &s, &bm, &bn, a.data(), &ld, S, U, &ldu, VT, &ldvt, work, lwork, inf, 1, 1);
    else sgesvd_(&s, &s, &bm, &bn, a.data(), &ld, S, U, &ldu, VT, &ldvt, work, lwork, inf, 1, 1);
  });
  require<numerical_failure>(info >= 0, "SVD: LAPACK gesvd rejected argument " + std::to_string(-info));
  return info == 0;
}
#endif

// OpenBLAS on one thread while it lives, for a batch of `count` items that h2expr's own parallel loop
// runs side by side: in OpenBLAS's pthreads build its threads inside that loop compete with the loop's
// (measured: a batch of 64 x 64 SVDs on 2 cores 3.4 s, 0.36 s with this); its OpenMP build already runs
// on one thread there, and without OpenBLAS this does nothing. The thread count is global (OpenBLAS
// 0.3.21 has no per-thread one): meanwhile other threads' OpenBLAS calls run on one thread too, and the
// last of nested or concurrent holders restores the count, unless someone else set another meanwhile.
class blas_one_thread {
 public:
  explicit blas_one_thread([[maybe_unused]] int count) {
#if defined(H2EXPR_HAS_OPENBLAS) && defined(_OPENMP)
    engaged_ = count > 1 && omp_get_max_threads() > 1 && !omp_in_parallel() && openblas_get_parallel() == 1;
#endif
    if (!engaged_) return;
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().holders++ == 0) state().saved = set_threads(1);
  }
  ~blas_one_thread() {
    if (!engaged_) return;
    std::lock_guard<std::mutex> lock(state().mutex);
    if (--state().holders == 0) restore_threads(state().saved);
  }
  blas_one_thread(const blas_one_thread&) = delete;
  blas_one_thread& operator=(const blas_one_thread&) = delete;

 private:
  struct shared {
    std::mutex mutex;
    int holders = 0, saved = 1;
  };
  static shared& state() {
    static shared s;
    return s;
  }
  static int set_threads([[maybe_unused]] int n) {  // the count before
#if defined(H2EXPR_HAS_OPENBLAS)
    const int before = openblas_get_num_threads();
    if (before != n) openblas_set_num_threads(n);
    return before;
#else
    return n;
#endif
  }
  static void restore_threads([[maybe_unused]] int saved) {  // unless someone set another count meanwhile
#if defined(H2EXPR_HAS_OPENBLAS)
    if (openblas_get_num_threads() == 1) openblas_set_num_threads(saved);
#endif
  }
  bool engaged_ = false;
};

}  // namespace h2expr::detail
