#pragma once
// Batched gemm on the GPU: C_i = alpha op(A_i) op(B_i) + beta C_i. Uniform batches go to cuBLAS;
// non-uniform batches (the blocks of an H^2 level, each with its own sizes) use h2expr's own kernel.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace h2expr::detail {

inline cublasOperation_t cublas_op(op o) { return o == op::none ? CUBLAS_OP_N : CUBLAS_OP_T; }

}  // namespace h2expr::detail

namespace h2expr::detail::kernels {

// Why an own kernel: cuBLAS has no gemm for items of different sizes, and cublasGemmGroupedBatched
// needs groups of equal sizes; a level of 10,000 blocks with sizes 32..64 has almost as many groups
// as items. One launch covers the batch: grid.x runs over the output tiles of the largest item,
// grid.y over items, and blocks whose tile lies outside their item return at once.
//
// BM x BN output tile per block, BK deep slices of op(A) and op(B) staged in shared memory, 256
// threads in a 16 x 16 layout, each owning a (BM/16) x (BN/16) micro-tile strided by 16 so that
// shared reads are broadcast/conflict-free and C stores are coalesced along columns.
template <class T, int BM, int BN, int BK>
__global__ void __launch_bounds__(256) gemm_vbatched(op ta, op tb, const int* m_, const int* n_, const int* k_,
                                                     T alpha, const T* const* A_, const int* lda_,
                                                     const T* const* B_, const int* ldb_, T beta, T* const* C_,
                                                     const int* ldc_, int tiles_m, int first_item) {
  constexpr int TM = BM / 16, TN = BN / 16;
  static_assert(BM % 16 == 0 && BN % 16 == 0 && (BM * BK) % 256 == 0 && (BN * BK) % 256 == 0);
  const int item = first_item + blockIdx.y;
  const int m = m_[item], n = n_[item];
  const int row0 = (blockIdx.x % tiles_m) * BM, col0 = (blockIdx.x / tiles_m) * BN;
  if (row0 >= m || col0 >= n) return;
  // alpha == 0: A and B are not read (BLAS semantics), so NaN there cannot leak into C.
  const int k = alpha == T(0) ? 0 : k_[item];
  const T* __restrict__ A = A_[item];
  const T* __restrict__ B = B_[item];
  T* __restrict__ C = C_[item];
  const std::int64_t lda = lda_[item], ldb = ldb_[item], ldc = ldc_[item];

  __shared__ T As[BK][BM + 1];  // As[kk][i] = op(A)(row0 + i, k0 + kk)
  __shared__ T Bs[BK][BN + 1];  // Bs[kk][j] = op(B)(k0 + kk, col0 + j)

  const int tid = threadIdx.x, tr = tid % 16, tc = tid / 16;
  T acc[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r)
#pragma unroll
    for (int c = 0; c < TN; ++c) acc[r][c] = T(0);

  for (int k0 = 0; k0 < k; k0 += BK) {
    // Loads walk the contiguous dimension of the stored matrix (coalesced for both transposes);
    // out-of-range entries are zero so the edges need no special case in the product.
#pragma unroll
    for (int l = 0; l < BM * BK / 256; ++l) {
      const int idx = tid + 256 * l;
      int i, kk;
      if (ta == op::none) i = idx % BM, kk = idx / BM;
      else kk = idx % BK, i = idx / BK;
      const int gi = row0 + i, gk = k0 + kk;
      T v = T(0);
      if (gi < m && gk < k) v = ta == op::none ? A[gi + gk * lda] : A[gk + gi * lda];
      As[kk][i] = v;
    }
#pragma unroll
    for (int l = 0; l < BN * BK / 256; ++l) {
      const int idx = tid + 256 * l;
      int j, kk;
      if (tb == op::none) kk = idx % BK, j = idx / BK;
      else j = idx % BN, kk = idx / BN;
      const int gj = col0 + j, gk = k0 + kk;
      T v = T(0);
      if (gj < n && gk < k) v = tb == op::none ? B[gk + gj * ldb] : B[gj + gk * ldb];
      Bs[kk][j] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      T a[TM], b[TN];
#pragma unroll
      for (int r = 0; r < TM; ++r) a[r] = As[kk][tr + 16 * r];
#pragma unroll
      for (int c = 0; c < TN; ++c) b[c] = Bs[kk][tc + 16 * c];
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] += a[r] * b[c];
    }
    __syncthreads();
  }

#pragma unroll
  for (int c = 0; c < TN; ++c) {
    const int j = col0 + tc + 16 * c;
    if (j >= n) continue;
#pragma unroll
    for (int r = 0; r < TM; ++r) {
      const int i = row0 + tr + 16 * r;
      if (i >= m) continue;
      T* p = C + i + j * ldc;
      // beta == 0: C is not read (it may hold NaN).
      *p = beta == T(0) ? alpha * acc[r][c] : alpha * acc[r][c] + beta * *p;
    }
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

template <class T>
void gemm_batched(context<cuda>& c, op ta, op tb, int m, int n, int k, T alpha, const T* const* A, int lda,
                  const T* const* B, int ldb, T beta, T* const* C, int ldc, int count) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count == 0 || m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, double>)
    H2EXPR_CUBLAS(cublasDgemmBatched(c.blas(), cublas_op(ta), cublas_op(tb), m, n, k, &alpha, A, lda, B, ldb,
                                     &beta, C, ldc, count));
  else
    H2EXPR_CUBLAS(cublasSgemmBatched(c.blas(), cublas_op(ta), cublas_op(tb), m, n, k, &alpha, A, lda, B, ldb,
                                     &beta, C, ldc, count));
}

template <class T>
void gemm_strided_batched(context<cuda>& c, op ta, op tb, int m, int n, int k, T alpha, const T* A, int lda,
                          std::int64_t stride_a, const T* B, int ldb, std::int64_t stride_b, T beta, T* C, int ldc,
                          std::int64_t stride_c, int count) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count == 0 || m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, double>)
    H2EXPR_CUBLAS(cublasDgemmStridedBatched(c.blas(), cublas_op(ta), cublas_op(tb), m, n, k, &alpha, A, lda,
                                            stride_a, B, ldb, stride_b, &beta, C, ldc, stride_c, count));
  else
    H2EXPR_CUBLAS(cublasSgemmStridedBatched(c.blas(), cublas_op(ta), cublas_op(tb), m, n, k, &alpha, A, lda,
                                            stride_a, B, ldb, stride_b, &beta, C, ldc, stride_c, count));
}

// Sizes, pointers and leading dimensions are device arrays; max_* bound the items' sizes.
template <class T>
void gemm_vbatched(context<cuda>& c, op ta, op tb, const int* m, const int* n, const int* k, T alpha,
                   const T* const* A, const int* lda, const T* const* B, const int* ldb, T beta, T* const* C,
                   const int* ldc, int count, int max_m, int max_n, int /*max_k*/) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0 || max_m <= 0 || max_n <= 0) return;
  auto launch = [&](auto kernel, int bm, int bn) {
    const int tiles_m = (max_m + bm - 1) / bm, tiles_n = (max_n + bn - 1) / bn;
    const std::int64_t tiles = std::int64_t(tiles_m) * tiles_n;
    require<invalid_argument>(tiles <= 0x7fffffff, "gemm_vbatched: item too large for the tiled kernel");
    for_item_chunks(count, [&](int first, int items) {
      kernel<<<dim3(unsigned(tiles), unsigned(items)), 256, 0, c.stream()>>>(ta, tb, m, n, k, alpha, A, lda, B,
                                                                             ldb, beta, C, ldc, tiles_m, first);
      H2EXPR_CUDA_LAUNCHED();
    });
  };
  // Small items waste most of a 64 x 64 tile; the blocks of H^2 levels are often 32 or less.
  if (max_m <= 32 && max_n <= 32) launch(kernels::gemm_vbatched<T, 32, 32, 16>, 32, 32);
  else launch(kernels::gemm_vbatched<T, 64, 64, 16>, 64, 64);
}

}  // namespace h2expr::detail
