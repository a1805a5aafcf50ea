#pragma once
// Random fills on the GPU with cuRAND's device API. Philox4_32_10 is counter-based: each thread
// starts its own subsequence (item, column) at the offset of its pair of rows, so an entry depends
// only on (seed, item, column, row), never on the launch shape.
#include <curand_kernel.h>
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/launch.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>

#include <cstdint>
#include <limits>

namespace h2expr::detail::kernels {

template <class T>
__device__ inline void random_pair(curandStatePhilox4_32_10_t* s, distribution d, T* out, int count) {
  if constexpr (sizeof(T) == 8) {
    double2 v = d == distribution::normal ? curand_normal2_double(s) : curand_uniform2_double(s);
    if (d == distribution::uniform) v = make_double2(1.0 - v.x, 1.0 - v.y);  // (0,1] -> [0,1)
    out[0] = v.x;
    if (count > 1) out[1] = v.y;
  } else {
    float2 v;
    if (d == distribution::normal) {
      v = curand_normal2(s);
    } else {  // two statements: the order of the draws must not depend on argument evaluation
      v.x = curand_uniform(s);
      v.y = curand_uniform(s);
    }
    if (d == distribution::uniform) v = make_float2(1.f - v.x, 1.f - v.y);
    out[0] = v.x;
    if (count > 1) out[1] = v.y;
  }
}

// grid.x over pairs of rows x columns of the largest item, grid.y over items.
template <class T>
__global__ void fill_random_vbatched(distribution d, const int* m, const int* n, T* const* A, const int* lda,
                                     int uniform_m, int uniform_n, T* single, std::int64_t single_ld,
                                     unsigned long long seed, int max_m, int first_item) {
  const int item = first_item + blockIdx.y;
  const int rows = m ? m[item] : uniform_m, cols = n ? n[item] : uniform_n;
  T* base = A ? A[item] : single;
  const std::int64_t ld = lda ? lda[item] : single_ld;
  const int pairs = (max_m + 1) / 2;
  for (std::int64_t t = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; t < std::int64_t(pairs) * cols;
       t += std::int64_t(gridDim.x) * blockDim.x) {
    const int j = int(t / pairs), pair = int(t % pairs), i = 2 * pair;
    if (i >= rows) continue;
    curandStatePhilox4_32_10_t s;
    curand_init(seed, (unsigned long long)item << 32 | unsigned(j), 4ull * pair, &s);
    random_pair(&s, d, base + i + j * ld, rows - i);
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

template <class T>
void fill_random(context<cuda>& c, distribution d, std::int64_t rows, std::int64_t cols, T* A, std::int64_t lda,
                 std::uint64_t seed) {
  if (rows == 0 || cols == 0) return;
  require(rows <= std::numeric_limits<int>::max(), "fill_random: more than 2^31 rows");
  const std::int64_t work = (rows + 1) / 2 * cols;
  const int blocks = int(std::min<std::int64_t>((work + 255) / 256, 65535));
  kernels::fill_random_vbatched<T><<<dim3(blocks, 1), 256, 0, c.stream()>>>(
      d, nullptr, nullptr, nullptr, nullptr, int(rows), int(cols), A, lda, seed, int(rows), 0);
  H2EXPR_CUDA_LAUNCHED();
}

// Sizes, pointers and leading dimensions are device arrays; max_m/max_n bound the items.
template <class T>
void fill_random_vbatched(context<cuda>& c, distribution d, const int* m, const int* n, T* const* A,
                          const int* lda, std::uint64_t seed, int count, int max_m, int max_n) {
  if (count == 0 || max_m == 0 || max_n == 0) return;
  const std::int64_t work = std::int64_t((max_m + 1) / 2) * max_n;
  const int blocks = int(std::min<std::int64_t>((work + 255) / 256, 1024));
  for_item_chunks(count, [&](int first, int items) {
    kernels::fill_random_vbatched<T><<<dim3(blocks, items), 256, 0, c.stream()>>>(
        d, m, n, A, lda, 0, 0, nullptr, 0, seed, max_m, first);
    H2EXPR_CUDA_LAUNCHED();
  });
}

}  // namespace h2expr::detail
