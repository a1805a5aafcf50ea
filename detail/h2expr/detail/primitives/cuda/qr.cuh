#pragma once
// Batched QR on the GPU: Householder QR and column-pivoted QR of non-uniform items, one thread block
// per item. The reflectors stay in A below the diagonal (LAPACK's layout), their scalars in shared
// memory; Q is then accumulated in place as in LAPACK's orgqr. Items of a few hundred rows fit
// without a workspace, and tall items (one block of a whole matrix) work too, only slower.
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#include <h2expr/detail/primitives/cuda/reduce.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace h2expr::detail::kernels {

// Householder QR of one item per block (grid.y), with column pivoting when Pivot. Shared memory:
// red[32] (double) | norms[max_n] (double, pivoting only) | tau[max_p] (T).
// Norms and reflector scalars are formed in double, so float columns neither underflow nor overflow
// when squared.
template <class T, bool Pivot>
__global__ void __launch_bounds__(256) qr_vbatched(const int* m_, const int* n_, T* const* A_, const int* lda_,
                                                   T* const* R_, const int* ldr_, int* const* perm_, int* rank_,
                                                   T rel_tol, bool form_q, int max_n, int first_item) {
  extern __shared__ double qr_shared[];
  double* red = qr_shared;
  double* norms = qr_shared + 32;
  T* tau = reinterpret_cast<T*>(qr_shared + 32 + (Pivot ? max_n : 0));

  const int item = first_item + blockIdx.y;
  const int m = m_[item], n = n_[item], p = min(m, n);
  T* __restrict__ A = A_[item];
  const std::int64_t lda = lda_[item];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  auto a = [&](int r, int c) -> T& { return A[r + c * lda]; };

  int* perm = nullptr;
  if constexpr (Pivot) {
    perm = perm_[item];
    for (int c = tid; c < n; c += blockDim.x) perm[c] = c;
    for (int c = warp; c < n; c += warps) {
      double s = 0;
      for (int r = lane; r < m; r += 32) s += double(a(r, c)) * double(a(r, c));
      s = warp_sum(s);
      if (lane == 0) norms[c] = s;
    }
  }

  for (int j = 0; j < p; ++j) {
    if constexpr (Pivot) {
      __syncthreads();  // norms of this step are complete
      int piv = j;
      double best = norms[j];
      for (int c = j + 1; c < n; ++c)
        if (norms[c] > best) best = norms[c], piv = c;  // first of equal norms, as Eigen
      __syncthreads();  // everyone has read norms before they change
      if (piv != j) {
        for (int r = tid; r < m; r += blockDim.x) {
          const T t = a(r, j);
          a(r, j) = a(r, piv);
          a(r, piv) = t;
        }
        if (tid == 0) {
          norms[piv] = norms[j];
          const int t = perm[j];
          perm[j] = perm[piv];
          perm[piv] = t;
        }
      }
      __syncthreads();
    }
    // The reflector of column j (LAPACK's dlarfg): H = I - tau v v^T, v = (1, A[j+1:m, j]).
    double x2 = 0;
    for (int r = j + 1 + tid; r < m; r += blockDim.x) x2 += double(a(r, j)) * double(a(r, j));
    x2 = block_sum(x2, red);
    const double alpha = a(j, j);
    double t = 0;
    if (x2 > 0) {
      const double beta = -copysign(sqrt(alpha * alpha + x2), alpha);
      t = (beta - alpha) / beta;
      const double scale = 1 / (alpha - beta);
      for (int r = j + 1 + tid; r < m; r += blockDim.x) a(r, j) = T(a(r, j) * scale);
      __syncthreads();  // all threads have read alpha
      if (tid == 0) a(j, j) = T(beta);
    }
    if (tid == 0) tau[j] = T(t);
    __syncthreads();
    // Apply H to the trailing columns, one warp per column.
    const T tj = T(t);
    for (int c = j + 1 + warp; c < n; c += warps) {
      T d = lane == 0 ? a(j, c) : T(0);
      for (int r = j + 1 + lane; r < m; r += 32) d += a(r, j) * a(r, c);
      const T f = tj * warp_sum(d);
      double s = 0;
      if (lane == 0) a(j, c) -= f;
      for (int r = j + 1 + lane; r < m; r += 32) {
        const T v = a(r, c) - f * a(r, j);
        a(r, c) = v;
        if constexpr (Pivot) s += double(v) * double(v);
      }
      if constexpr (Pivot) {
        // The exact norm of the rows the next step sees (no downdating).
        s = warp_sum(s);
        if (lane == 0) norms[c] = s;
      }
    }
    __syncthreads();  // the next column is complete before its reflector is formed
  }

  if (R_) {
    T* __restrict__ R = R_[item];
    const std::int64_t ldr = ldr_[item];
    for (std::int64_t idx = tid; idx < std::int64_t(p) * n; idx += blockDim.x) {
      const int r = int(idx % p), c = int(idx / p);
      R[r + c * ldr] = r <= c ? a(r, c) : T(0);
    }
  }
  if constexpr (Pivot) {
    if (tid == 0) {
      int rank = 0;
      const T r00 = p > 0 ? abs(a(0, 0)) : T(0);
      for (int j = 0; j < p; ++j)
        if (r00 > T(0) && abs(a(j, j)) > rel_tol * r00) ++rank;
      rank_[item] = rank;
    }
  }
  if (!form_q) return;  // R only: the reflectors stay in A
  __syncthreads();  // R is read before Q overwrites it

  // Q = H_0 ... H_{p-1} [I; 0], backwards and in place (LAPACK's dorg2r).
  for (int j = p - 1; j >= 0; --j) {
    const T tj = tau[j];
    for (int c = j + 1 + warp; c < p; c += warps) {
      T d = lane == 0 ? a(j, c) : T(0);
      for (int r = j + 1 + lane; r < m; r += 32) d += a(r, j) * a(r, c);
      const T f = tj * warp_sum(d);
      if (lane == 0) a(j, c) -= f;
      for (int r = j + 1 + lane; r < m; r += 32) a(r, c) -= f * a(r, j);
    }
    __syncthreads();
    for (int r = tid; r < m; r += blockDim.x) a(r, j) = r < j ? T(0) : r == j ? T(1) - tj : -tj * a(r, j);
    __syncthreads();
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

template <class T, bool Pivot>
void qr_launch(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
               const int* ldr, int* const* perm, int* rank, T rel_tol, int count, int max_m, int max_n,
               bool form_q = true) {
  if (count <= 0) return;
  const int max_p = std::min(max_m, max_n);
  const std::size_t shared = (32 + (Pivot ? std::size_t(max_n) : 0)) * sizeof(double) +
                             std::size_t(std::max(max_p, 0)) * sizeof(T);
  require<invalid_argument>(shared <= 48 * 1024, std::string(Pivot ? "cpqr" : "qr") + "_vbatched: items with " +
                                                     std::to_string(max_n) + " columns exceed the kernel's shared memory");
  for_item_chunks(count, [&](int first, int items) {
    kernels::qr_vbatched<T, Pivot><<<dim3(1, items), 256, shared, c.stream()>>>(m, n, A, lda, R, ldr, perm, rank,
                                                                                 rel_tol, form_q, max_n, first);
    H2EXPR_CUDA_LAUNCHED();
  });
}

// A_i (m x n) := Q_i (m x p, p = min(m, n)); R_i (p x n) upper trapezoidal when R is not null.
// Columns p..n-1 of A_i (only when n > m) are left holding R's trailing columns.
template <class T>
void qr_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                 const int* ldr, int count, int max_m, int max_n) {
  qr_launch<T, false>(c, m, n, A, lda, R, ldr, nullptr, nullptr, T(0), count, max_m, max_n);
}

// R_i (p x n) only, for callers that need the triangle alone (compression's weights): Q is not formed,
// which halves the work; A_i is left holding the Householder reflectors.
template <class T>
void qr_r_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                   const int* ldr, int count, int max_m, int max_n) {
  qr_launch<T, false>(c, m, n, A, lda, R, ldr, nullptr, nullptr, T(0), count, max_m, max_n, /*form_q=*/false);
}

// A_i P_i = Q_i R_i with |R_jj| non-increasing; perm_i[j] = original index of column j;
// rank_i = #{j < p : |R_jj| > rel_tol |R_00|}.
template <class T>
void cpqr_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                   const int* ldr, int* const* perm, int* rank, T rel_tol, int count, int max_m, int max_n) {
  qr_launch<T, true>(c, m, n, A, lda, R, ldr, perm, rank, rel_tol, count, max_m, max_n);
}

}  // namespace h2expr::detail
