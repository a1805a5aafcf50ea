#pragma once
// Marshaling on the GPU: pointer arrays of batch items, built on the device so that batched calls
// need no host round trip. (Own one-line kernels: Thrust's transform cost every CUDA translation unit
// that marshals ~15 s of compile, its headers alone included.)
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/primitives/cuda/primitives.hpp>

#include <algorithm>
#include <cstdint>

namespace h2expr::detail::kernels {

template <class T>
__global__ void marshal_strided(T* base, std::int64_t stride, int count, T** out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) out[i] = base + i * stride;
}
template <class T>
__global__ void marshal_offsets(T* base, const std::int64_t* offsets, int count, T** out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) out[i] = base + offsets[i];
}

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// out[i] = base + i * stride
template <class T>
void marshal_strided(context<cuda>& c, T* base, std::int64_t stride, int count, T** out) {
  if (count <= 0) return;
  kernels::marshal_strided<<<std::min((count + 255) / 256, 4096), 256, 0, c.stream()>>>(base, stride, count, out);
  H2EXPR_CUDA_LAUNCHED();
}

// out[i] = base + offsets[i]
template <class T>
void marshal_offsets(context<cuda>& c, T* base, const std::int64_t* offsets, int count, T** out) {
  if (count <= 0) return;
  kernels::marshal_offsets<<<std::min((count + 255) / 256, 4096), 256, 0, c.stream()>>>(base, offsets, count, out);
  H2EXPR_CUDA_LAUNCHED();
}

}  // namespace h2expr::detail
