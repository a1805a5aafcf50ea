#pragma once
// Instances of the batched dense primitives (on the host Eigen per item, on the GPU h2expr's kernels:
// the costliest compiles of the library; the SVDs, the costliest of them, in svd.hpp).
#include <h2expr/detail/batched.hpp>

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

namespace h2expr::detail {
H2EXPR_INSTANCES(H2EXPR_PRIMITIVES_INSTANCES, extern template)
}  // namespace h2expr::detail
