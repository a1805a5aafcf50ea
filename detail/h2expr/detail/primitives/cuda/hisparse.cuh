#pragma once
// The HiSparse product of the CUDA space (hisparse_format.hpp): Y = alpha op(H) X + beta Y from the
// one stored tree, for op(H) = H and H^T alike. A level-batched form of the paper's queues: the queues
// per node type (COO chunks of at most 256 entries, whatever their level and coordinate width; dense
// leaves) are built once with the matrix, and each is one launch over all levels at once: a thread
// per COO entry, a thread per output row (column) of a dense leaf, sums added with atomics into Y,
// which is scaled by beta first. Transposition only swaps which coordinate is the output.
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#include <h2expr/detail/primitives/hisparse_format.hpp>

#include <algorithm>
#include <cstdint>

namespace h2expr::detail::kernels {

template <class T>
__global__ void hisparse_coo(const unsigned char* pool, const hisparse::chunk* chunks, std::int64_t count, bool trans,
                             T alpha, const T* X, std::int64_t ldx, T* Y, std::int64_t ldy, int nv) {
  for (std::int64_t q = blockIdx.x; q < count; q += gridDim.x) {
    const hisparse::chunk ch = chunks[q];
    const unsigned k = hisparse::kind_of(ch.node);
    const unsigned char* p = pool + hisparse::offset_of(ch.node);
    const std::uint32_t n = *reinterpret_cast<const std::uint32_t*>(p);  // nodes are 16-byte aligned
    const int width = hisparse::coordinate_bytes(k);
    const T* values = reinterpret_cast<const T*>(p + hisparse::coo_values_offset<T>(n, width));
    for (std::uint32_t t = threadIdx.x; t < ch.count; t += blockDim.x) {
      const std::uint32_t e = ch.first + t;
      std::uint32_t r, c;
      if (width == 1) {
        r = p[4 + 2 * std::size_t(e)], c = p[5 + 2 * std::size_t(e)];
      } else if (width == 2) {
        const auto* x = reinterpret_cast<const std::uint16_t*>(p + 4);
        r = x[2 * std::size_t(e)], c = x[2 * std::size_t(e) + 1];
      } else {
        const auto* x = reinterpret_cast<const std::uint32_t*>(p + 4);
        r = x[2 * std::size_t(e)], c = x[2 * std::size_t(e) + 1];
      }
      const std::int64_t row = ch.row0 + r, col = ch.col0 + c;
      const std::int64_t out = trans ? col : row, in = trans ? row : col;
      const T a = alpha * values[e];
      for (int v = 0; v < nv; ++v) atomicAdd(Y + out + v * ldy, a * X[in + v * ldx]);
    }
  }
}

template <class T>
__global__ void hisparse_dense(const unsigned char* pool, const hisparse::chunk* chunks, std::int64_t count,
                               std::int64_t rows, std::int64_t cols, int d, bool trans, T alpha, const T* X,
                               std::int64_t ldx, T* Y, std::int64_t ldy, int nv) {
  for (std::int64_t q = blockIdx.x; q < count; q += gridDim.x) {
    const hisparse::chunk ch = chunks[q];
    const T* A = reinterpret_cast<const T*>(pool + hisparse::offset_of(ch.node));
    const std::int64_t mi = rows - ch.row0 < d ? rows - ch.row0 : d;
    const std::int64_t mj = cols - ch.col0 < d ? cols - ch.col0 : d;
    const std::int64_t outs = trans ? mj : mi, ins = trans ? mi : mj;
    const std::int64_t out0 = trans ? ch.col0 : ch.row0, in0 = trans ? ch.row0 : ch.col0;
    for (std::int64_t i = threadIdx.x; i < outs; i += blockDim.x)
      for (int v = 0; v < nv; ++v) {
        T s = T(0);
        for (std::int64_t j = 0; j < ins; ++j) s += (trans ? A[j * d + i] : A[i * d + j]) * X[in0 + j + v * ldx];
        atomicAdd(Y + out0 + i + v * ldy, alpha * s);
      }
  }
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// Y(0:out, 0:nv) = alpha op(H) X + beta Y (beta == 0 does not read Y), op(H) = H^T when trans; the
// queues of h are in device memory.
template <class T>
void hisparse_multiply(context<cuda>& c, const hisparse::tree_view& h, bool trans, T alpha, const T* X,
                       std::int64_t ldx, T beta, T* Y, std::int64_t ldy, int nv) {
  const std::int64_t out = trans ? h.g.cols : h.g.rows;
  if (out == 0 || nv == 0) return;
  scale_2d(c, out, nv, beta, Y, ldy);
  if (h.coo_count > 0) {
    const unsigned grid = unsigned(std::min<std::int64_t>(h.coo_count, 1 << 20));
    kernels::hisparse_coo<T><<<grid, 128, 0, c.stream()>>>(h.pool, h.coo, h.coo_count, trans, alpha, X, ldx, Y, ldy, nv);
    H2EXPR_CUDA_LAUNCHED();
  }
  if (h.dense_count > 0) {
    const unsigned grid = unsigned(std::min<std::int64_t>(h.dense_count, 1 << 20));
    kernels::hisparse_dense<T><<<grid, std::min(h.g.d(), 256), 0, c.stream()>>>(
        h.pool, h.dense, h.dense_count, h.g.rows, h.g.cols, h.g.d(), trans, alpha, X, ldx, Y, ldy, nv);
    H2EXPR_CUDA_LAUNCHED();
  }
}

}  // namespace h2expr::detail
