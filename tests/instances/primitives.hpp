#pragma once
// Instances of the batched dense primitives (on the host Eigen per item, on the GPU h2expr's kernels:
// the costliest compiles of the library; the SVDs, the costliest of them, in svd.hpp).
#include <h2expr/detail/primitives/batched.hpp>

#include "instances/spaces.hpp"
#include "instances/svd.hpp"

#define H2EXPR_PRIMITIVES_INSTANCES(kind, T, S)                                                                     \
  kind void h2expr::detail::gemm_batched<T>(::h2expr::context<S>&, op, op, int, int, int, T, const T* const*, int, \
                                            const T* const*, int, T, T* const*, int, int);                         \
  kind void h2expr::detail::gemm_strided_batched<T>(::h2expr::context<S>&, op, op, int, int, int, T, const T*, int, \
                                                    std::int64_t, const T*, int, std::int64_t, T, T*, int,          \
                                                    std::int64_t, int);                                             \
  kind void h2expr::detail::gemm_vbatched<T>(::h2expr::context<S>&, op, op, const int*, const int*, const int*, T,  \
                                             const T* const*, const int*, const T* const*, const int*, T,          \
                                             T* const*, const int*, int, int, int, int);                           \
  kind void h2expr::detail::qr_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*, const int*,   \
                                           T* const*, const int*, int, int, int);                                  \
  kind void h2expr::detail::qr_r_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*, const int*, \
                                             T* const*, const int*, int, int, int);                                \
  kind void h2expr::detail::cpqr_vbatched<T>(::h2expr::context<S>&, const int*, const int*, T* const*, const int*, \
                                             T* const*, const int*, int* const*, int*, T, int, int, int);          \
  kind void h2expr::detail::potrf_vbatched<T>(::h2expr::context<S>&, const int*, T* const*, const int*, int*, int, \
                                              int);                                                                \
  kind void h2expr::detail::potrf_batched<T>(::h2expr::context<S>&, int, T* const*, int, int*, int);               \
  kind void h2expr::detail::gram_vbatched<T>(::h2expr::context<S>&, const int*, const int*, const T* const*,       \
                                             const int*, double* const*, const int*, int, int, int);               \
  kind void h2expr::detail::cholqr_factor_vbatched<T>(::h2expr::context<S>&, const int*, const double* const*,     \
                                                      const int*, T* const*, const int*, double* const*,           \
                                                      double* const*, double, int*, int, int);                     \
  kind void h2expr::detail::trsm_batched<T>(::h2expr::context<S>&, side, uplo, op, diag, int, int, T,              \
                                            const T* const*, int, T* const*, int, int);                            \
  kind void h2expr::detail::trsm_vbatched<T>(::h2expr::context<S>&, side, uplo, op, diag, const int*, const int*,  \
                                             T, const T* const*, const int*, T* const*, const int*, int, int, int);

// The rest of the CUDA backend (detail/primitives/cuda/primitives.hpp): compiled here once, so that the C++
// translation units of the CUDA space (H2EXPR_CUDA_PRIMITIVES_EXTERN: the CUDA suites' drivers and the
// algorithms' CUDA instances) link it.
#define H2EXPR_CUDA_EVALUATE_INSTANCE(kind, T, K, D)                                                        \
  kind void h2expr::detail::evaluate_blocks_on_device<T, D, ::h2expr::kernels::K>(                                 \
      ::h2expr::context<::h2expr::cuda>&, const ::h2expr::kernels::K&, const ::h2expr::detail::block_points<T>&, T*);
#define H2EXPR_CUDA_EVALUATE_INSTANCES(kind, T, K) \
  H2EXPR_CUDA_EVALUATE_INSTANCE(kind, T, K, 1)     \
  H2EXPR_CUDA_EVALUATE_INSTANCE(kind, T, K, 2)     \
  H2EXPR_CUDA_EVALUATE_INSTANCE(kind, T, K, 3)
#define H2EXPR_CUDA_BACKEND_INSTANCES(kind, T, S)                                                                  \
  kind void h2expr::detail::copy_batched<T>(::h2expr::context<S>&, int, int, const T* const*, int, T* const*, int, \
                                            int, const int*);                                                      \
  kind void h2expr::detail::copy_vbatched<T>(::h2expr::context<S>&, op, const int*, const int*, const T* const*,   \
                                             const int*, T* const*, const int*, int);                              \
  kind void h2expr::detail::axpy<T>(::h2expr::context<S>&, std::size_t, T, const T*, T*);                         \
  kind void h2expr::detail::axpby_2d<T>(::h2expr::context<S>&, std::size_t, std::size_t, T, const T*, std::size_t, \
                                        T, T*, std::size_t, const T*);                                             \
  kind void h2expr::detail::add_to_diagonals<T>(::h2expr::context<S>&, int, int, T, const T*, const int*, T*);    \
  kind void h2expr::detail::fill<T>(::h2expr::context<S>&, T*, std::size_t, T);                                   \
  kind void h2expr::detail::fill_random<T>(::h2expr::context<S>&, distribution, std::int64_t, std::int64_t, T*,   \
                                           std::int64_t, std::uint64_t);                                           \
  kind void h2expr::detail::fill_random_vbatched<T>(::h2expr::context<S>&, distribution, const int*, const int*,   \
                                                    T* const*, const int*, std::uint64_t, int, int, int);          \
  kind void h2expr::detail::bsr_gemm<T>(::h2expr::context<S>&, op, int, const int*, const int*, const int*,        \
                                        const T*, int, int, std::int64_t, const T*, std::int64_t, T*, std::int64_t, \
                                        int, T, bsr_shape);                                                        \
  kind void h2expr::detail::hisparse_multiply<T>(::h2expr::context<S>&, const hisparse::tree_view&, bool, T,        \
                                                 const T*, std::int64_t, T, T*, std::int64_t, int);              \
  kind void h2expr::detail::gather_rows<T>(::h2expr::context<S>&, const int*, std::int64_t, const T*,              \
                                           std::int64_t, T*, std::int64_t, int);                                   \
  kind void h2expr::detail::scatter_rows<T>(::h2expr::context<S>&, const int*, std::int64_t, const T*,             \
                                            std::int64_t, T*, std::int64_t, int, T, T);                            \
  kind bool h2expr::detail::all_finite<T>(::h2expr::context<S>&, const T*, std::size_t);                          \
  kind double h2expr::detail::sum_of_squares<T>(::h2expr::context<S>&, const T*, std::size_t);                    \
  kind void h2expr::detail::scale_2d<T>(::h2expr::context<S>&, std::int64_t, std::int64_t, T, T*, std::int64_t);  \
  H2EXPR_CUDA_EVALUATE_INSTANCES(kind, T, exponential)                                                             \
  H2EXPR_CUDA_EVALUATE_INSTANCES(kind, T, gaussian)                                                                \
  H2EXPR_CUDA_EVALUATE_INSTANCES(kind, T, matern)                                                                  \
  H2EXPR_CUDA_EVALUATE_INSTANCES(kind, T, inverse_distance)

namespace h2expr::detail {
H2EXPR_INSTANCES(H2EXPR_PRIMITIVES_INSTANCES, extern template)
// Index arrays (the double library compiles them).
#define H2EXPR_CUDA_INDEX_INSTANCES(kind)                                                                          \
  kind void h2expr::detail::fill<int>(::h2expr::context<::h2expr::cuda>&, int*, std::size_t, int);

#ifdef H2EXPR_CUDA_SPACE
H2EXPR_CUDA_INDEX_INSTANCES(extern template)
H2EXPR_CUDA_BACKEND_INSTANCES(extern template, float, ::h2expr::cuda)
H2EXPR_CUDA_BACKEND_INSTANCES(extern template, double, ::h2expr::cuda)
#endif
}  // namespace h2expr::detail
