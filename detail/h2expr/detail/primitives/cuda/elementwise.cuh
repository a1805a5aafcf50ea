#pragma once
// Element-wise kernels of the CUDA space: batched copies, axpy-like updates, fills and scaling (declared
// in primitives.hpp).
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace h2expr::detail::kernels {

// One block of threads per item; threads stride over the item's entries.
template <class T>
__global__ void copy_batched(int rows, int cols, const T* const* src, int lds, T* const* dst, int ldd,
                             const int* item_cols) {
  const T* s = src[blockIdx.x];
  T* d = dst[blockIdx.x];
  const std::int64_t total = std::int64_t(rows) * (item_cols ? item_cols[blockIdx.x] : cols);
  for (std::int64_t e = threadIdx.x; e < total; e += blockDim.x) {
    const std::int64_t i = e % rows, j = e / rows;
    d[i + j * ldd] = s[i + j * lds];
  }
}

template <class T>
__global__ void copy_vbatched(op trans, const int* rows, const int* cols, const T* const* src, const int* lds,
                              T* const* dst, const int* ldd) {
  const int r = rows[blockIdx.x];
  const std::int64_t total = std::int64_t(r) * cols[blockIdx.x], ls = lds[blockIdx.x], ld = ldd[blockIdx.x];
  const T* s = src[blockIdx.x];
  T* d = dst[blockIdx.x];
  for (std::int64_t e = threadIdx.x; e < total; e += blockDim.x) {
    const std::int64_t i = e % r, j = e / r;
    d[i + j * ld] = trans == op::none ? s[i + j * ls] : s[j + i * ls];
  }
}

template <class T>
__global__ void fill(T* data, std::size_t n, T value) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    data[i] = value;
}

template <class T>
__global__ void axpy(std::size_t n, T alpha, const T* x, T* y) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    y[i] += alpha * x[i];
}

template <class T>
__global__ void axpby_2d(std::size_t rows, std::size_t cols, T alpha, const T* x, std::size_t ldx, T beta, T* y,
                         std::size_t ldy, const T* d) {
  const std::size_t total = rows * cols;
  for (std::size_t e = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; e < total;
       e += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t i = e % rows, j = e / rows;
    T& v = y[i + j * ldy];
    const T ax = d ? alpha * d[i] * x[i + j * ldx] : alpha * x[i + j * ldx];
    v = beta == T(0) ? ax : ax + beta * v;
  }
}

template <class T>
__global__ void add_to_diagonals(int count, int m, T alpha, const T* d, const int* block, T* blocks) {
  const std::int64_t total = std::int64_t(count) * m;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t t = e / m, j = e % m;
    blocks[std::int64_t(block[t]) * m * m + j * (m + 1)] += alpha * d[e];
  }
}

template <class T>
__global__ void scale_2d(std::int64_t rows, std::int64_t cols, T beta, T* Y, std::int64_t ldy) {
  const std::int64_t total = rows * cols;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x)
    Y[e % rows + (e / rows) * ldy] *= beta;
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// dst[i](0:rows, 0:c_i) = src[i](0:rows, 0:c_i) for i < count, c_i = item_cols ? item_cols[i] : cols
// (pointer and column arrays in device memory).
template <class T>
void copy_batched(context<cuda>& c, int rows, int cols, const T* const* src, int lds, T* const* dst, int ldd,
                  int count, const int* item_cols) {
  if (rows == 0 || cols == 0 || count == 0) return;
  kernels::copy_batched<<<count, 256, 0, c.stream()>>>(rows, cols, src, lds, dst, ldd, item_cols);
  H2EXPR_CUDA_LAUNCHED();
}
// dst_i = op(src_i), blocks of any shape and leading dimension (all arrays in device memory).
template <class T>
void copy_vbatched(context<cuda>& c, op trans, const int* rows, const int* cols, const T* const* src, const int* lds,
                   T* const* dst, const int* ldd, int count) {
  if (count == 0) return;
  kernels::copy_vbatched<<<count, 256, 0, c.stream()>>>(trans, rows, cols, src, lds, dst, ldd);
  H2EXPR_CUDA_LAUNCHED();
}
// y += alpha x over n contiguous entries.
template <class T>
void axpy(context<cuda>& c, std::size_t n, T alpha, const T* x, T* y) {
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<std::size_t>((n + 255) / 256, 8192));
  kernels::axpy<<<blocks, 256, 0, c.stream()>>>(n, alpha, x, y);
  H2EXPR_CUDA_LAUNCHED();
}
// Y = alpha D X + beta Y over a rows x cols block (beta == 0 does not read Y), D = diag(d) or the identity.
template <class T>
void axpby_2d(context<cuda>& c, std::size_t rows, std::size_t cols, T alpha, const T* x, std::size_t ldx, T beta, T* y,
              std::size_t ldy, const T* d) {
  if (rows == 0 || cols == 0) return;
  const unsigned blocks = unsigned(std::min<std::size_t>((rows * cols + 255) / 256, 8192));
  kernels::axpby_2d<<<blocks, 256, 0, c.stream()>>>(rows, cols, alpha, x, ldx, beta, y, ldy, d);
  H2EXPR_CUDA_LAUNCHED();
}
// A_t(j, j) += alpha d[t m + j] for the m x m blocks blocks + block[t] m m (the host version's contract).
template <class T>
void add_to_diagonals(context<cuda>& c, int count, int m, T alpha, const T* d, const int* block, T* blocks) {
  if (count <= 0 || m <= 0) return;
  const unsigned grid = unsigned(std::min<std::int64_t>((std::int64_t(count) * m + 255) / 256, 8192));
  kernels::add_to_diagonals<<<grid, 256, 0, c.stream()>>>(count, m, alpha, d, block, blocks);
  H2EXPR_CUDA_LAUNCHED();
}
template <class T>
void fill(context<cuda>& c, T* data, std::size_t n, T value) {
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<std::size_t>((n + 255) / 256, 8192));
  kernels::fill<<<blocks, 256, 0, c.stream()>>>(data, n, value);
  H2EXPR_CUDA_LAUNCHED();
}

// Y = beta Y over rows x cols with a leading dimension.
template <class T>
void scale_2d(context<cuda>& c, std::int64_t rows, std::int64_t cols, T beta, T* Y, std::int64_t ldy) {
  if (rows == 0 || cols == 0 || beta == T(1)) return;
  if (beta == T(0)) {  // all-zero bits are 0.0, and NaN in Y must not survive
    H2EXPR_CUDA(cudaMemset2DAsync(Y, ldy * sizeof(T), 0, rows * sizeof(T), cols, c.stream()));
    return;
  }
  const int blocks = int(std::min<std::int64_t>((rows * cols + 255) / 256, 8192));
  kernels::scale_2d<<<blocks, 256, 0, c.stream()>>>(rows, cols, beta, Y, ldy);
  H2EXPR_CUDA_LAUNCHED();
}

}  // namespace h2expr::detail
