#pragma once
// Batched Cholesky (lower, in place) on the GPU: h2expr's own kernel for the items that fit a block's
// shared memory, cuSOLVER's potrf one by one for larger ones. Both factor float data in double: ARA's
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
#include <vector>

namespace h2expr::detail::kernels {

// A pivot fails when it is not positive, NaN or infinite (both paths below, the same test).
__device__ inline bool failed_pivot(double d) { return !(d > 0) || isinf(d); }

// One item per block (grid.y), its lower triangle staged in double, packed column by column, in shared
// memory. Right-looking: each step scales column j and updates the trailing triangle, one warp per
// column. Items larger than max_item_n are left alone (cuSOLVER factors them, below). Sizes and
// leading dimensions come from n_/lda_ when given, else from uniform_n/uniform_lda.
template <class T>
__global__ void __launch_bounds__(256) potrf_vbatched(const int* n_, int uniform_n, T* const* A_,
                                                      const int* lda_, int uniform_lda, int* info, int max_item_n,
                                                      int first_item) {
  extern __shared__ double chol_shared[];
  const int item = first_item + blockIdx.y;
  const int n = n_ ? n_[item] : uniform_n;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  if (n > max_item_n) return;
  if (n == 0) {
    if (tid == 0) info[item] = 0;
    return;
  }
  T* __restrict__ A = A_[item];
  const std::int64_t lda = lda_ ? lda_[item] : uniform_lda;
  double* __restrict__ L = chol_shared;
  auto l = [&](int r, int c) -> double& { return L[std::int64_t(c) * n - std::int64_t(c) * (c - 1) / 2 + (r - c)]; };

  for (int c = warp; c < n; c += warps)
    for (int r = c + lane; r < n; r += 32) l(r, c) = double(A[r + c * lda]);
  __syncthreads();

  int failed = 0;
  for (int j = 0; j < n; ++j) {
    const double d = l(j, j);
    if (failed_pivot(d)) {  // the same in every thread
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

// The lower triangle of an n x n block from one precision to another (float data through a double
// factorization and back).
template <class From, class To>
__global__ void convert_lower(int n, const From* __restrict__ a, std::int64_t lda, To* __restrict__ b, std::int64_t ldb) {
  for (std::int64_t c = blockIdx.y; c < n; c += gridDim.y)
    for (std::int64_t r = c + blockIdx.x * blockDim.x + threadIdx.x; r < n; r += std::int64_t(gridDim.x) * blockDim.x)
      b[r + c * ldb] = To(a[r + c * lda]);
}

// cuSOLVER reports pivots that are not positive; one that is NaN or infinite may pass it (an infinite
// one zeroes its column, and a later pivot may fail instead). The first diagonal entry of L before the
// one cuSOLVER reported that is not a positive finite number fails the item, as in the kernel above.
template <class T>
__global__ void potrf_check_diagonal(int n, const T* __restrict__ L, std::int64_t ld, int* info) {
  if (threadIdx.x != 0) return;
  const int factored = *info > 0 ? *info - 1 : n;  // the columns cuSOLVER factored
  for (int j = 0; j < factored; ++j) {
    if (failed_pivot(double(L[j + j * ld]))) {
      *info = j + 1;
      return;
    }
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// Items whose packed triangle fits the block's shared memory go to the kernel, all in one launch; larger
// ones (n over ~240 on Hopper: HARA's near fields reach 2,500 rows in 3D) to cuSOLVER's potrf, item by
// item, each call using the whole device (one block of the kernel would hold the triangle in global
// memory and run n^3/6 updates alone). Float data is factored in double there too.
template <class T>
void potrf_own(context<cuda>& c, const int* n, int uniform_n, T* const* A, const int* lda, int uniform_lda,
               int* info, int count, int max_n) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (count <= 0) return;
  auto packed_bytes = [](int k) { return std::size_t(k) * std::size_t(k + 1) / 2 * sizeof(double); };
  const std::size_t optin = std::size_t(c.properties().sharedMemPerBlockOptin);
  int fits = 0;  // the largest n whose triangle the kernel holds in shared memory
  while (packed_bytes(fits + 1) <= optin) ++fits;

  // The large items' sizes and addresses, read on the host before the kernel is queued (a few numbers
  // per item; the factorizations dwarf the wait).
  std::vector<int> ns, lds;
  std::vector<T*> ptrs;
  if (max_n > fits) {
    ns.assign(std::size_t(count), uniform_n), lds.assign(std::size_t(count), uniform_lda), ptrs.resize(std::size_t(count));
    if (n) download_2d(c, std::size_t(count), 1, n, std::size_t(count), ns.data(), std::size_t(count));
    if (lda) download_2d(c, std::size_t(count), 1, lda, std::size_t(count), lds.data(), std::size_t(count));
    download_2d(c, std::size_t(count), 1, A, std::size_t(count), ptrs.data(), std::size_t(count));
  }

  // The kernel, unless every item is cuSOLVER's.
  const bool small_items = max_n <= fits || std::any_of(ns.begin(), ns.end(), [&](int k) { return k <= fits; });
  const int kernel_n = std::min(std::max(max_n, 0), fits);
  const auto kernel = kernels::potrf_vbatched<T>;
  const std::size_t bytes = packed_bytes(kernel_n);
  // Shared memory beyond the default 48 KiB needs an opt-in per kernel.
  if (small_items && bytes > 48 * 1024)
    H2EXPR_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  const int threads = max_n > 64 ? 256 : 128;
  if (small_items)
    for_item_chunks(count, [&](int first, int items) {
      kernel<<<dim3(1, items), threads, bytes, c.stream()>>>(n, uniform_n, A, lda, uniform_lda, info, kernel_n, first);
      H2EXPR_CUDA_LAUNCHED();
    });
  if (max_n <= fits) return;

  // Float items are factored in a double copy (ld = n), as in the kernel.
  int largest = 0;
  for (int k : ns)
    if (k > fits) largest = std::max(largest, k);
  // max_n bounds every item (one past it would be left unfactored, its info unwritten).
  require<invalid_argument>(largest <= max_n, "potrf_vbatched: an item of " + std::to_string(largest) +
                                                  " rows past max_n = " + std::to_string(max_n));
  const device_scratch<double> copy(c, std::is_same_v<T, float> ? std::size_t(largest) * std::size_t(largest) : 0);
  auto factor_of = [&](int i, int& ldf) -> double* {  // where item i is factored
    if constexpr (std::is_same_v<T, float>) {
      ldf = ns[std::size_t(i)];
      return copy.get();
    } else {
      ldf = lds[std::size_t(i)];
      return ptrs[std::size_t(i)];
    }
  };
  int lwork = 1;
  for (int i = 0; i < count; ++i) {
    if (ns[std::size_t(i)] <= fits) continue;
    int ldf = 0, w = 0;
    double* f = factor_of(i, ldf);
    // cuSOLVER's legacy potrf indexes with int.
    require<invalid_argument>(std::size_t(ldf) * std::size_t(ns[std::size_t(i)]) < (std::size_t(1) << 31),
                              "potrf_vbatched: an item of " + std::to_string(ns[std::size_t(i)]) + " rows, ld " +
                                  std::to_string(ldf) + ", past cuSOLVER's 32-bit indexing");
    H2EXPR_CUSOLVER(cusolverDnDpotrf_bufferSize(c.solver(), CUBLAS_FILL_MODE_LOWER, ns[std::size_t(i)], f, ldf, &w));
    lwork = std::max(lwork, w);
  }
  const device_scratch<double> work(c, std::size_t(lwork));
  for (int i = 0; i < count; ++i) {
    const int k = ns[std::size_t(i)];
    if (k <= fits) continue;
    int ldf = 0;
    double* f = factor_of(i, ldf);
    const dim3 grid(std::min((k + 255) / 256, 64), std::min(k, 65535));
    if constexpr (std::is_same_v<T, float>) {
      kernels::convert_lower<float, double><<<grid, 256, 0, c.stream()>>>(k, ptrs[std::size_t(i)], lds[std::size_t(i)], f, ldf);
      H2EXPR_CUDA_LAUNCHED();
    }
    H2EXPR_CUSOLVER(cusolverDnDpotrf(c.solver(), CUBLAS_FILL_MODE_LOWER, k, f, ldf, work.get(), lwork, info + i));
    kernels::potrf_check_diagonal<double><<<1, 32, 0, c.stream()>>>(k, f, ldf, info + i);
    H2EXPR_CUDA_LAUNCHED();
    if constexpr (std::is_same_v<T, float>) {
      kernels::convert_lower<double, float><<<grid, 256, 0, c.stream()>>>(k, f, ldf, ptrs[std::size_t(i)], lds[std::size_t(i)]);
      H2EXPR_CUDA_LAUNCHED();
    }
  }
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
  // The own kernel for both precisions where it holds the items in shared memory (n <= 240 on Hopper),
  // cuSOLVER's potrf item by item past that (potrf_own): one failure semantics everywhere (NaN pivots
  // fail, which cusolverDnDpotrfBatched lets pass); the kernel was faster than cuSOLVER's batched potrf
  // for n = 64..128 in a development measurement on an H100 (not kept under benchmarks/results).
  potrf_own<T>(c, nullptr, n, A, nullptr, lda, info, count, n);
}

}  // namespace h2expr::detail
