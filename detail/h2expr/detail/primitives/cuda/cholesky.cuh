#pragma once
// Batched Cholesky (lower, in place) on the GPU. Uniform double batches go to cuSOLVER; non-uniform
// batches, and float data of any shape, use h2expr's own kernel, which factors in double: ARA's
// Cholesky QR of float samples squares their condition number in the Gram matrix, so the Gram
// matrix is read as float, factored in double and written back as float (HARA's mixed precision).
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/elementwise.cuh>
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/core/cuda/memory.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace h2expr::detail::kernels {

// One item per block (grid.y). The lower triangle is staged in double, packed column by column,
// in shared memory when it fits (use_shared) and in the global workspace otherwise. Right-looking:
// each step scales column j and updates the trailing triangle, one warp per column.
// Sizes and leading dimensions come from n_/lda_ when given, else from uniform_n/uniform_lda.
template <class T>
__global__ void __launch_bounds__(256) potrf_vbatched(const int* n_, int uniform_n, T* const* A_,
                                                      const int* lda_, int uniform_lda, int* info, double* work,
                                                      std::int64_t work_stride, bool use_shared, int first_item) {
  extern __shared__ double chol_shared[];
  const int item = first_item + blockIdx.y;
  const int n = n_ ? n_[item] : uniform_n;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  if (n == 0) {
    if (tid == 0) info[item] = 0;
    return;
  }
  T* __restrict__ A = A_[item];
  const std::int64_t lda = lda_ ? lda_[item] : uniform_lda;
  double* __restrict__ L = use_shared ? chol_shared : work + item * work_stride;
  auto l = [&](int r, int c) -> double& { return L[std::int64_t(c) * n - std::int64_t(c) * (c - 1) / 2 + (r - c)]; };

  for (int c = warp; c < n; c += warps)
    for (int r = c + lane; r < n; r += 32) l(r, c) = double(A[r + c * lda]);
  __syncthreads();

  int failed = 0;
  for (int j = 0; j < n; ++j) {
    const double d = l(j, j);
    if (!(d > 0) || isinf(d)) {  // not positive, NaN or infinite: the same in every thread
      failed = j + 1;
      break;
    }
    const double ljj = sqrt(d);
    for (int r = j + 1 + tid; r < n; r += blockDim.x) l(r, j) /= ljj;
    __syncthreads();
    if (tid == 0) l(j, j) = ljj;  // nobody reads (j, j) during the update
    for (int c = j + 1 + warp; c < n; c += warps) {
      const double lc = l(c, j);
      for (int r = c + lane; r < n; r += 32) l(r, c) -= l(r, j) * lc;
    }
    __syncthreads();
  }

  for (int c = warp; c < n; c += warps)
    for (int r = c + lane; r < n; r += 32) A[r + c * lda] = T(l(r, c));
  if (tid == 0) info[item] = failed;
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

template <class T>
void potrf_own(context<cuda>& c, const int* n, int uniform_n, T* const* A, const int* lda, int uniform_lda,
               int* info, int count, int max_n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0) return;
  const std::size_t packed = std::size_t(std::max(max_n, 0)) * std::size_t(std::max(max_n, 0) + 1) / 2;
  const std::size_t bytes = packed * sizeof(double);
  const auto kernel = kernels::potrf_vbatched<T>;
  // Shared memory beyond the default 48 KiB needs an opt-in per kernel; beyond the device's
  // opt-in limit the triangle lives in a global workspace (slower, any size).
  const bool use_shared = bytes <= std::size_t(c.properties().sharedMemPerBlockOptin);
  if (use_shared && bytes > 48 * 1024)
    H2EXPR_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  const device_scratch<double> work(c, use_shared ? 0 : packed * std::size_t(count));
  const int threads = max_n > 64 ? 256 : 128;
  for_item_chunks(count, [&](int first, int items) {
    kernel<<<dim3(1, items), threads, use_shared ? bytes : 0, c.stream()>>>(
        n, uniform_n, A, lda, uniform_lda, info, work.get(), std::int64_t(packed), use_shared, first);
    H2EXPR_CUDA_LAUNCHED();
  });
}

// A_i = L_i L_i^T with L_i in the lower triangle (the strict upper triangle is not referenced);
// info_i = 0, or j + 1 when the pivot of column j is not positive or not finite.
template <class T>
void potrf_vbatched(context<cuda>& c, const int* n, T* const* A, const int* lda, int* info, int count, int max_n) {
  potrf_own<T>(c, n, 0, A, lda, 0, info, count, max_n);
}

template <class T>
void potrf_batched(context<cuda>& c, int n, T* const* A, int lda, int* info, int count) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0) return;
  if (n == 0) {
    fill(c, info, std::size_t(count), 0);
    return;
  }
  // The own kernel for both precisions: one failure semantics everywhere (NaN pivots fail, which
  // cusolverDnDpotrfBatched lets pass), and it was faster than cuSOLVER's batched potrf for n = 64..128
  // in a development measurement on an H100 (not kept under benchmarks/results).
  potrf_own<T>(c, nullptr, n, A, nullptr, lda, info, count, n);
}

}  // namespace h2expr::detail
