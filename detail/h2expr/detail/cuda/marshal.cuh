#pragma once
// Marshaling on the GPU: pointer arrays of batch items, built on the device so that batched calls
// need no host round trip.
#include <h2expr/detail/cuda/check.cuh>
#include <h2expr/detail/cuda/context.cuh>
#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <cstdint>

namespace h2expr::detail::kernels {

// Functors rather than device lambdas, so that users need not compile with --extended-lambda.
template <class T>
struct strided_pointer {
  T* base;
  std::int64_t stride;
  __host__ __device__ T* operator()(int i) const { return base + i * stride; }
};
template <class T>
struct offset_pointer {
  T* base;
  const std::int64_t* offsets;
  __host__ __device__ T* operator()(int i) const { return base + offsets[i]; }
};

}  // namespace h2expr::detail::kernels

namespace h2expr::detail {

// out[i] = base + i * stride
template <class T>
void marshal_strided(context<cuda>& c, T* base, std::int64_t stride, int count, T** out) {
  if (count <= 0) return;
  thrust::transform(thrust::cuda::par_nosync.on(c.stream()), thrust::counting_iterator<int>(0),
                    thrust::counting_iterator<int>(count), out, kernels::strided_pointer<T>{base, stride});
  H2EXPR_CUDA_LAUNCHED();
}

// out[i] = base + offsets[i]
template <class T>
void marshal_offsets(context<cuda>& c, T* base, const std::int64_t* offsets, int count, T** out) {
  if (count <= 0) return;
  thrust::transform(thrust::cuda::par_nosync.on(c.stream()), thrust::counting_iterator<int>(0),
                    thrust::counting_iterator<int>(count), out, kernels::offset_pointer<T>{base, offsets});
  H2EXPR_CUDA_LAUNCHED();
}

}  // namespace h2expr::detail
