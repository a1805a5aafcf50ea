#pragma once
// Warp and block reductions shared by the one-block-per-item kernels (QR, SVD, ...).
namespace h2expr::detail::kernels {

template <class T>
__device__ inline T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The sum over the block, in every thread. `red` holds 32 values in shared memory. Every thread adds
// the warp sums in the same order, so all threads see the same bits (branches on it agree).
template <class T>
__device__ inline T block_sum(T v, T* red) {
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();  // a previous call's readers are done with red
  if (lane == 0) red[warp] = v;
  __syncthreads();
  T s = T(0);
  for (int w = 0; w < warps; ++w) s += red[w];
  return s;
}

// The largest value in the block and its index (the smallest index among equal values), in every
// thread. `red` and `red_i` hold 32 entries in shared memory.
__device__ inline void block_argmax(double& v, int& i, double* red, int* red_i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const double ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  __syncthreads();
  if (lane == 0) red[warp] = v, red_i[warp] = i;
  __syncthreads();
  v = red[0], i = red_i[0];
  for (int w = 1; w < warps; ++w)
    if (red[w] > v || (red[w] == v && red_i[w] < i)) v = red[w], i = red_i[w];
}

}  // namespace h2expr::detail::kernels
