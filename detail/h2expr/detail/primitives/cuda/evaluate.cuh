#pragma once
// Kernel entries of many blocks at once on the GPU (built-in kernels; primitives.hpp evaluates any other
// callable on the host), finiteness and sums of squares of device data. The layout: block_points.hpp.
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#include <h2expr/detail/primitives/block_points.hpp>
#include <h2expr/detail/primitives/kernels.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace h2expr::detail::kernels {

template <class T, int D, class Kernel>
__global__ void evaluate_blocks(Kernel kernel, const int* row_node, const int* col_node, const T* row_points,
                                const int* row_count, int row_stride, const T* col_points, const int* col_count,
                                int col_stride, T* out, int first_block) {
  const int b = first_block + blockIdx.x;
  const int rn = row_node[b], cn = col_node[b], m = row_count[rn], n = col_count[cn];
  const std::int64_t size = std::int64_t(row_stride) * col_stride;
  T* o = out + b * size;
  for (std::int64_t e = threadIdx.x; e < size; e += blockDim.x) {
    const int i = int(e % row_stride), j = int(e / row_stride);
    T v = T(0);
    if (i < m && j < n) {
      std::array<T, D> x, y;
#pragma unroll
      for (int d = 0; d < D; ++d) {
        x[d] = row_points[(std::int64_t(rn) * row_stride + i) * D + d];
        y[d] = col_points[(std::int64_t(cn) * col_stride + j) * D + d];
      }
      v = kernel(x, y);
    }
    o[e] = v;
  }
}

// *found becomes 1 where an entry is NaN or infinite.
template <class T>
__global__ void find_non_finite(const T* data, std::size_t n, int* found) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    if (!isfinite(data[i])) *found = 1;
}

// *sum += the squares of the entries (in double), a block's partial sum at a time.
template <class T>
__global__ void sum_of_squares(const T* data, std::size_t n, double* sum) {
  __shared__ double part[256];
  double s = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
    s += double(data[i]) * double(data[i]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, part[0]);
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// The entries of a built-in kernel (primitives.hpp's evaluate_blocks decides where to evaluate).
template <class T, int D, class Kernel>
void evaluate_blocks_on_device(context<cuda>& c, const Kernel& kernel, const block_points<T>& p, T* out) {
  static_assert(is_device_kernel<Kernel>::value, "h2expr: only built-in kernels run on the device");
  auto ctx = std::shared_ptr<context<cuda>>(std::shared_ptr<context<cuda>>(), &c);  // non-owning
  buffer<int, cuda> rn(ctx, p.row_node), cn(ctx, p.col_node), rc(ctx, p.row_count), cc(ctx, p.col_count);
  buffer<T, cuda> rp(ctx, p.row_points), cp(ctx, p.col_points);
  for (int first = 0; first < p.blocks(); first += 1 << 30) {
    const int count = std::min(p.blocks() - first, 1 << 30);
    kernels::evaluate_blocks<T, D><<<count, 128, 0, c.stream()>>>(kernel, rn.data(), cn.data(), rp.data(), rc.data(),
                                                                  p.row_stride, cp.data(), cc.data(), p.col_stride,
                                                                  out, first);
    H2EXPR_CUDA_LAUNCHED();
  }
}  // the index and point buffers are freed after the kernels, in stream order

// A grid-stride reduction over n entries into one device value that starts at zero: `launch(blocks,
// value)` starts the kernel on c's stream; the value comes back to the host.
template <class R, class Launch>
R reduce_to_scalar(context<cuda>& c, std::size_t n, Launch&& launch) {
  const device_scratch<R> value(c, 1);
  R result{};
  H2EXPR_CUDA(cudaMemsetAsync(value.get(), 0, sizeof(R), c.stream()));
  launch(unsigned(std::min<std::size_t>((n + 255) / 256, 8192)), value.get());
  H2EXPR_CUDA_LAUNCHED();
  H2EXPR_CUDA(cudaMemcpyAsync(&result, value.get(), sizeof(R), cudaMemcpyDeviceToHost, c.stream()));
  c.synchronize();
  return result;
}

template <class T>
bool all_finite(context<cuda>& c, const T* data, std::size_t n) {
  if (n == 0) return true;
  return reduce_to_scalar<int>(c, n, [&](unsigned blocks, int* found) {
           kernels::find_non_finite<<<blocks, 256, 0, c.stream()>>>(data, n, found);
         }) == 0;
}

template <class T>
double sum_of_squares(context<cuda>& c, const T* data, std::size_t n) {
  if (n == 0) return 0;
  return reduce_to_scalar<double>(c, n, [&](unsigned blocks, double* sum) {
    kernels::sum_of_squares<<<blocks, 256, 0, c.stream()>>>(data, n, sum);
  });
}

}  // namespace h2expr::detail
