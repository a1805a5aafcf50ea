#pragma once
// Block-sparse-row products on the GPU: the coupling and dense-leaf phases of HGEMV (bandwidth bound:
// every block is read once per chunk of vectors). One thread block per block row; its warps share
// the (entry, row chunk) work items of the row, accumulate in registers, and add into the row's
// output in shared memory; the row is written once at the end. Same semantics as host/bsr.hpp.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/bsr_shape.hpp>
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#include <h2expr/detail/primitives/cuda/reduce.cuh>

#include <algorithm>
#include <cstdint>

namespace h2expr::detail::kernels {

template <class T, int NV>
__global__ void __launch_bounds__(256) bsr_gemm(op block_op, const int* ptr, const int* idx, const int* blk,
                                                const T* __restrict__ blocks, int mb, int nb,
                                                std::int64_t block_stride, const T* __restrict__ X,
                                                std::int64_t ldx, T* Y, std::int64_t ldy, int nv, T beta,
                                                bsr_shape shape, int first_row) {
  extern __shared__ unsigned char bsr_shared[];
  T* ys = reinterpret_cast<T*>(bsr_shared);  // m x NV accumulator of this block row
  const bool uniform = shape.k_out == nullptr;  // shape.uniform() is host code
  const int t = first_row + blockIdx.x, v0 = blockIdx.y * NV, nvc = min(NV, nv - v0);
  const int m = uniform ? mb : int(shape.k_out[t]);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int i = threadIdx.x; i < m * NV; i += blockDim.x) ys[i] = T(0);
  __syncthreads();
  const int e0 = ptr[t], entries = ptr[t + 1] - e0;
  const T* Xv = X + v0 * ldx;
  // Block e of the row: its stored block, its input width and its x block.
  auto block_of = [&](int e) {
    const int b = blk ? blk[e] : e;
    return blocks + (uniform ? std::int64_t(b) * block_stride : shape.at_block[b]);
  };
  auto width = [&](int e) { return uniform ? nb : int(shape.k_in[idx[e]]); };
  auto x_of = [&](int e) { return Xv + (uniform ? std::int64_t(idx[e]) * nb : shape.at_in[idx[e]]); };
  if (block_op == op::none) {
    // Item = (entry, chunk of 32 output rows): lanes own rows, so block reads are coalesced.
    const int chunks = (m + 31) / 32;
    for (int item = warp; item < entries * chunks; item += warps) {
      const int e = e0 + item / chunks, r = (item % chunks) * 32 + lane, n = width(e);
      const T* B = block_of(e);
      const T* x = x_of(e);
      T acc[NV];
#pragma unroll
      for (int v = 0; v < NV; ++v) acc[v] = T(0);
      if (r < m) {
        // Eight independent loads in flight per lane before their products: the phase is bandwidth
        // bound, and one dependent load at a time leaves most of it unused.
        constexpr int U = 8;
        int c = 0;
        for (; c + U <= n; c += U) {
          T b[U];
#pragma unroll
          for (int u = 0; u < U; ++u) b[u] = B[r + std::int64_t(c + u) * m];
#pragma unroll
          for (int u = 0; u < U; ++u)
#pragma unroll
            for (int v = 0; v < NV; ++v)
              if (v < nvc) acc[v] += b[u] * x[c + u + v * ldx];
        }
        for (; c < n; ++c) {
          const T b = B[r + std::int64_t(c) * m];
#pragma unroll
          for (int v = 0; v < NV; ++v)
            if (v < nvc) acc[v] += b * x[c + v * ldx];
        }
      }
      if (r < m)
#pragma unroll
        for (int v = 0; v < NV; ++v)
          if (v < nvc) atomicAdd(&ys[r + v * m], acc[v]);
    }
  } else {
    // op(B) = B^T, B stored n x m: lanes run down a stored column (coalesced), then reduce.
    constexpr int rows_per_item = 4;
    const int chunks = (m + rows_per_item - 1) / rows_per_item;
    for (int item = warp; item < entries * chunks; item += warps) {
      const int e = e0 + item / chunks, r0 = (item % chunks) * rows_per_item, n = width(e);
      const T* B = block_of(e);
      const T* x = x_of(e);
      for (int r = r0; r < min(r0 + rows_per_item, m); ++r) {
        T acc[NV];
#pragma unroll
        for (int v = 0; v < NV; ++v) acc[v] = T(0);
        for (int c = lane; c < n; c += 32) {
          const T b = B[c + std::int64_t(r) * n];
#pragma unroll
          for (int v = 0; v < NV; ++v)
            if (v < nvc) acc[v] += b * x[c + v * ldx];
        }
#pragma unroll
        for (int v = 0; v < NV; ++v) {
          if (v >= nvc) break;
          const T s = warp_sum(acc[v]);
          if (lane == 0) atomicAdd(&ys[r + v * m], s);
        }
      }
    }
  }
  __syncthreads();
  T* y = Y + (uniform ? std::int64_t(t) * mb : shape.at_out[t]) + v0 * ldy;
  for (int i = threadIdx.x; i < m * nvc; i += blockDim.x) {
    const int r = i % m, v = i / m;
    T* p = y + r + v * ldy;
    *p = beta == T(0) ? ys[r + v * m] : beta * *p + ys[r + v * m];
  }
}

template <class T>
__global__ void gather_rows(const int* src, std::int64_t rows, const T* X, std::int64_t ldx, T* Xp,
                            std::int64_t ldp, int nv) {
  const std::int64_t total = rows * nv;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i % rows, v = i / rows;
    const int s = src[r];
    Xp[r + v * ldp] = s >= 0 ? X[s + v * ldx] : T(0);
  }
}

template <class T>
__global__ void scatter_rows(const int* dst, std::int64_t rows, const T* Yp, std::int64_t ldp, T* Y,
                             std::int64_t ldy, int nv, T alpha, T beta) {
  const std::int64_t total = rows * nv;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = i % rows, v = i / rows;
    const int d = dst[r];
    if (d < 0) continue;
    T& y = Y[d + v * ldy];
    y = beta == T(0) ? alpha * Yp[r + v * ldp] : alpha * Yp[r + v * ldp] + beta * y;
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

template <class T>
void bsr_gemm(context<cuda>& c, op block_op, int rows, const int* ptr, const int* idx, const int* blk,
              const T* blocks, int mb, int nb, std::int64_t block_stride, const T* X, std::int64_t ldx, T* Y,
              std::int64_t ldy, int nv, T beta, bsr_shape shape) {
  if (rows == 0 || mb == 0 || nv == 0) return;
  // grid.y counts groups of NV >= 4 vectors (NV = 1 only when nv == 1) and may not pass 65,535: wider
  // blocks of vectors go in parts.
  constexpr int widest = 65535 * 4;
  if (nv > widest) {
    for (int j = 0; j < nv; j += widest)
      bsr_gemm(c, block_op, rows, ptr, idx, blk, blocks, mb, nb, block_stride, X + j * ldx, ldx, Y + j * ldy, ldy,
               std::min(widest, nv - j), beta, shape);
    return;
  }
  // The widest chunk of vectors whose accumulator fits the default 48 KB of shared memory.
  auto launch = [&](auto kernel, int NV) {
    const std::size_t shared = std::size_t(mb) * NV * sizeof(T);
    require<invalid_argument>(shared <= 48 * 1024, "bsr_gemm: blocks with " + std::to_string(mb) + " rows are too large");
    for (int first = 0; first < rows; first += 1 << 30) {
      const int count = std::min(rows - first, 1 << 30);
      kernel<<<dim3(count, (nv + NV - 1) / NV), 256, shared, c.stream()>>>(block_op, ptr, idx, blk, blocks, mb, nb,
                                                                           block_stride, X, ldx, Y, ldy, nv, beta, shape, first);
      H2EXPR_CUDA_LAUNCHED();
    }
  };
  const std::size_t row_bytes = std::size_t(mb) * sizeof(T);
  if (nv == 1) launch(kernels::bsr_gemm<T, 1>, 1);
  else if (nv <= 4 || row_bytes * 16 > 48 * 1024) launch(kernels::bsr_gemm<T, 4>, 4);
  else launch(kernels::bsr_gemm<T, 16>, 16);
}

template <class T>
void gather_rows(context<cuda>& c, const int* src, std::int64_t rows, const T* X, std::int64_t ldx, T* Xp,
                 std::int64_t ldp, int nv) {
  if (rows == 0 || nv == 0) return;
  const int blocks = int(std::min<std::int64_t>((rows * nv + 255) / 256, 8192));
  kernels::gather_rows<<<blocks, 256, 0, c.stream()>>>(src, rows, X, ldx, Xp, ldp, nv);
  H2EXPR_CUDA_LAUNCHED();
}

template <class T>
void scatter_rows(context<cuda>& c, const int* dst, std::int64_t rows, const T* Yp, std::int64_t ldp, T* Y,
                  std::int64_t ldy, int nv, T alpha, T beta) {
  if (rows == 0 || nv == 0) return;
  const int blocks = int(std::min<std::int64_t>((rows * nv + 255) / 256, 8192));
  kernels::scatter_rows<<<blocks, 256, 0, c.stream()>>>(dst, rows, Yp, ldp, Y, ldy, nv, alpha, beta);
  H2EXPR_CUDA_LAUNCHED();
}

}  // namespace h2expr::detail
