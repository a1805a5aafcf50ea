#pragma once
// Batched thin SVD on the GPU: one-sided Jacobi (Hestenes), one thread block per item. Jacobi suits
// the small blocks of H^2 compression: it is accurate (relative accuracy in the singular values),
// needs no bidiagonalization, and parallelizes over disjoint column pairs inside a block.
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/core/cuda/memory.cuh>
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#include <h2expr/detail/primitives/cuda/reduce.cuh>

#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace h2expr::detail::kernels {

// Shared memory: red[32] | sigma[max_p] | coef[max_p] (double) | red_i[32] | swaps[max_p] | flag (int).
// W (M x N, M >= N) is the matrix Jacobi orthogonalizes from the right, X the accumulated rotations
// (N x N, null when not wanted). For m >= n, W = A and X = V; for m < n, W = A^T (in V, or in the
// workspace when V is null) and X = the first m columns of A, since A = X S W^T then.
template <class T>
__global__ void __launch_bounds__(256) svd_vbatched(const int* m_, const int* n_, T* const* A_, const int* lda_,
                                                    T* const* S_, T* const* V_, const int* ldv_, T* work,
                                                    std::int64_t work_stride, int max_p, int max_sweeps,
                                                    int first_item) {
  extern __shared__ double svd_shared[];
  double* red = svd_shared;
  double* sigma = red + 32;
  double* coef = sigma + max_p;
  int* red_i = reinterpret_cast<int*>(coef + max_p);
  int* swaps = red_i + 32;
  int* flag = swaps + max_p;

  const int item = first_item + blockIdx.y;
  const int m = m_[item], n = n_[item], N = min(m, n);
  if (N == 0) return;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  T* const A = A_[item];
  const std::int64_t lda = lda_[item];
  T* const Vo = V_ ? V_[item] : nullptr;
  const std::int64_t ldv = V_ ? ldv_[item] : 0;

  T* W;
  T* X;
  std::int64_t ldw, ldx;
  int M;
  bool w_out;  // W is an output (U, or V when transposed), so its columns are normalized and sorted
  if (m >= n) {
    W = A, ldw = lda, M = m, X = Vo, ldx = ldv, w_out = true;
  } else {
    W = Vo ? Vo : work + item * work_stride, ldw = Vo ? ldv : n, M = n, X = A, ldx = lda, w_out = Vo != nullptr;
    for (std::int64_t idx = tid; idx < std::int64_t(m) * n; idx += blockDim.x) {
      const int r = int(idx % m), c = int(idx / m);
      W[c + r * ldw] = A[r + c * lda];
    }
    __syncthreads();  // A is read before X = I overwrites it
  }
  if (X)
    for (int idx = tid; idx < N * N; idx += blockDim.x) X[idx % N + (idx / N) * ldx] = T(idx % N == idx / N);
  auto w = [&](int r, int c) -> T& { return W[r + c * ldw]; };
  auto x = [&](int r, int c) -> T& { return X[r + c * ldx]; };

  // Sweeps of the round-robin (circle) ordering: N/2 disjoint pairs per round, one warp per pair.
  // Converged when |a_i . a_j| <= tol ||a_i|| ||a_j|| for every pair of a sweep.
  const double tol = sqrt(double(M)) * (std::is_same_v<T, float> ? double(FLT_EPSILON) : DBL_EPSILON);
  const int Np = N + (N & 1), P = Np - 1;
  for (int sweep = 0; sweep < max_sweeps; ++sweep) {
    if (tid == 0) *flag = 0;
    __syncthreads();
    for (int round = 0; round < P; ++round) {
      for (int k = warp; k < Np / 2; k += warps) {
        int i = k == 0 ? round : (round + k) % P;
        int j = k == 0 ? P : (round - k + P) % P;
        if (i >= N || j >= N) continue;  // the dummy column of odd N
        if (i > j) {
          const int t = i;
          i = j, j = t;
        }
        double al = 0, be = 0, ga = 0;
        for (int r = lane; r < M; r += 32) {
          const double wi = w(r, i), wj = w(r, j);
          al += wi * wi, be += wj * wj, ga += wi * wj;
        }
        al = warp_sum(al), be = warp_sum(be), ga = warp_sum(ga);
        if (!(fabs(ga) > tol * sqrt(al) * sqrt(be))) continue;
        if (lane == 0) *flag = 1;
        // The rotation that zeroes the off-diagonal of [al ga; ga be] (Rutishauser's formulas).
        const double zeta = (be - al) / (2 * ga);
        const double t = copysign(1.0, zeta) / (fabs(zeta) + hypot(1.0, zeta));
        const double cs = 1 / sqrt(1 + t * t), sn = cs * t;
        const T c = T(cs), s = T(sn);
        for (int r = lane; r < M; r += 32) {
          const T wi = w(r, i), wj = w(r, j);
          w(r, i) = c * wi - s * wj;
          w(r, j) = s * wi + c * wj;
        }
        if (X)
          for (int r = lane; r < N; r += 32) {
            const T xi = x(r, i), xj = x(r, j);
            x(r, i) = c * xi - s * xj;
            x(r, j) = s * xi + c * xj;
          }
      }
      __syncthreads();
    }
    const int rotated = *flag;
    __syncthreads();  // everyone has read the flag before it is reset
    if (!rotated) break;
  }

  // Singular values are the column norms; normalized columns are the singular vectors.
  for (int j = warp; j < N; j += warps) {
    double s = 0;
    for (int r = lane; r < M; r += 32) s += double(w(r, j)) * double(w(r, j));
    s = sqrt(warp_sum(s));
    // Columns too small to normalize count as zero; their vectors come from the completion below.
    if (!(s >= double(std::numeric_limits<T>::min()) / double(std::numeric_limits<T>::epsilon()))) s = 0;
    if (lane == 0) sigma[j] = s;
    if (w_out)
      for (int r = lane; r < M; r += 32) w(r, j) = s > 0 ? T(w(r, j) / s) : T(0);
  }
  __syncthreads();

  // Vectors of zero singular values: orthonormal completion by Gram-Schmidt (twice) of the unit vector
  // e_k with the largest component outside the span of the other columns (at least (M - N + 1) / M).
  if (w_out)
    for (int j = 0; j < N; ++j) {
      if (sigma[j] > 0) continue;
      auto in_set = [&](int l) { return l != j && (l < j || sigma[l] > 0); };
      double best = -1;
      int k = M;
      for (int r = tid; r < M; r += blockDim.x) {
        double s = 1;
        for (int l = 0; l < N; ++l)
          if (in_set(l)) s -= double(w(r, l)) * double(w(r, l));
        if (s > best) best = s, k = r;
      }
      block_argmax(best, k, red, red_i);
      for (int l = warp; l < N; l += warps)
        if (lane == 0) coef[l] = in_set(l) ? double(w(k, l)) : 0.0;
      __syncthreads();
      for (int r = tid; r < M; r += blockDim.x) {
        double v = r == k;
        for (int l = 0; l < N; ++l) v -= coef[l] * double(w(r, l));
        w(r, j) = T(v);
      }
      __syncthreads();
      for (int l = warp; l < N; l += warps) {
        double d = 0;
        if (in_set(l))
          for (int r = lane; r < M; r += 32) d += double(w(r, l)) * double(w(r, j));
        d = warp_sum(d);
        if (lane == 0) coef[l] = d;
      }
      __syncthreads();
      double nrm = 0;
      for (int r = tid; r < M; r += blockDim.x) {
        double v = w(r, j);
        for (int l = 0; l < N; ++l) v -= coef[l] * double(w(r, l));
        w(r, j) = T(v);
        nrm += v * v;
      }
      nrm = sqrt(block_sum(nrm, red));
      for (int r = tid; r < M; r += blockDim.x) w(r, j) = T(w(r, j) / nrm);
      __syncthreads();
    }

  // Descending order: thread 0 runs a selection sort on sigma and records its swaps; every thread then
  // replays the swaps on the rows it owns, so no further synchronization is needed.
  __syncthreads();  // the completion loop above reads sigma in every thread (racecheck found this)
  if (tid == 0) {
    T* S = S_[item];
    for (int k = 0; k < N; ++k) {
      int b = k;
      for (int l = k + 1; l < N; ++l)
        if (sigma[l] > sigma[b]) b = l;
      swaps[k] = b;
      const double t = sigma[k];
      sigma[k] = sigma[b];
      sigma[b] = t;
      S[k] = T(sigma[k]);
    }
  }
  __syncthreads();
  if (w_out)
    for (int r = tid; r < M; r += blockDim.x)
      for (int k = 0; k < N; ++k) {
        const int b = swaps[k];
        if (b == k) continue;
        const T t = w(r, k);
        w(r, k) = w(r, b);
        w(r, b) = t;
      }
  if (X)
    for (int r = tid; r < N; r += blockDim.x)
      for (int k = 0; k < N; ++k) {
        const int b = swaps[k];
        if (b == k) continue;
        const T t = x(r, k);
        x(r, k) = x(r, b);
        x(r, b) = t;
      }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// A_i = U_i diag(S_i) V_i^T, p = min(m, n): A_i := U_i (m x p); S_i (p values, descending);
// V_i (n x p) when V is not null.
template <class T>
void svd_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                  T* const* V, const int* ldv, int count, int max_m, int max_n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0 || max_m <= 0 || max_n <= 0) return;
  const int max_p = std::min(max_m, max_n);
  const std::size_t shared = (32 + 2 * std::size_t(max_p)) * sizeof(double) + (33 + std::size_t(max_p)) * sizeof(int);
  require<invalid_argument>(shared <= 48 * 1024, "svd_vbatched: items with min(m, n) = " + std::to_string(max_p) +
                                                     " exceed the kernel's shared memory");
  // Items with m < n are transposed; without V to hold A^T they need scratch.
  const std::int64_t work_stride = std::int64_t(max_n) * max_p;
  const device_scratch<T> work(c, V ? 0 : std::size_t(work_stride) * std::size_t(count));
  const int sweeps = std::is_same_v<T, float> ? 20 : 30;
  for_item_chunks(count, [&](int first, int items) {
    kernels::svd_vbatched<T><<<dim3(1, items), 256, shared, c.stream()>>>(m, n, A, lda, S, V, ldv, work.get(),
                                                                           work_stride, max_p, sweeps, first);
    H2EXPR_CUDA_LAUNCHED();
  });
}

// S_i and V_i of A_i for truncation (host/svd.hpp): here the full SVD, exact for every value; A_i := U_i.
template <class T>
void svd_right_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                        T* const* V, const int* ldv, int count, int max_m, int max_n, double /*resolve*/) {
  svd_vbatched(c, m, n, A, lda, S, V, ldv, count, max_m, max_n);
}

}  // namespace h2expr::detail
