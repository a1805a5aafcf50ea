#pragma once
// The batched dense primitives: one interface, two backends. Algorithms call these by name with a
// context<host> or context<cuda>; overload resolution picks the backend. Every pointer, size and
// info array lives in the context's space (device memory for CUDA); max_* bound the item sizes.
//
//   gemm_batched / gemm_strided_batched / gemm_vbatched   C_i = alpha op(A_i) op(B_i) + beta C_i
//   qr_vbatched      A_i := Q_i (thin), R_i upper trapezoidal; qr_r_vbatched: R_i alone
//   cpqr_vbatched    A_i P_i = Q_i R_i (column pivoting), numerical rank at a relative tolerance
//   svd_vbatched     A_i := U_i, S_i, V_i (thin); svd_right_vbatched: S_i, V_i for truncation
//   potrf_batched / potrf_vbatched   lower Cholesky in place; float data factored in double
//   gram_vbatched / cholqr_factor_vbatched   mixed-precision Cholesky QR of sample blocks (ARA)
//   trsm_batched / trsm_vbatched     B_i := alpha op(A_i)^{-1} B_i or alpha B_i op(A_i)^{-1}
//   fill_random / fill_random_vbatched   standard normal or uniform [0,1), reproducible from a seed
//   bsr_gemm         block-sparse rows times a block vector (coupling and dense phases of HGEMV)
//   hisparse_multiply   a HiSparse tree, or its transpose, times a block of vectors
//   gather_rows / scatter_rows           user order <-> padded tree order
//   evaluate_blocks / all_finite / sum_of_squares   kernel entries of many blocks; finiteness, norms
// The host backend is the reference semantics; the CUDA backend matches it (see tests/). Algorithms
// describe their operands as batches (batch.hpp), which build the pointer and size arrays these take.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/kernels.hpp>
#include <h2expr/detail/primitives/host/bsr.hpp>
#include <h2expr/detail/primitives/host/cholesky.hpp>
#include <h2expr/detail/primitives/host/cholesky_qr.hpp>
#include <h2expr/detail/primitives/host/elementwise.hpp>
#include <h2expr/detail/primitives/host/evaluate.hpp>
#include <h2expr/detail/primitives/host/gemm.hpp>
#include <h2expr/detail/primitives/host/hisparse.hpp>
#include <h2expr/detail/primitives/host/qr.hpp>
#include <h2expr/detail/primitives/host/random.hpp>
#include <h2expr/detail/primitives/host/svd.hpp>
#include <h2expr/detail/primitives/host/trsm.hpp>
// The CUDA backend: its kernels in a CUDA translation unit, their declarations in a C++ one that links
// them (H2EXPR_CUDA_PRIMITIVES_EXTERN).
#if defined(__CUDACC__)
#include <h2expr/detail/primitives/cuda/bsr.cuh>
#include <h2expr/detail/primitives/cuda/cholesky.cuh>
#include <h2expr/detail/primitives/cuda/cholesky_qr.cuh>
#include <h2expr/detail/primitives/cuda/elementwise.cuh>
#include <h2expr/detail/primitives/cuda/evaluate.cuh>
#include <h2expr/detail/primitives/cuda/gemm.cuh>
#include <h2expr/detail/primitives/cuda/hisparse.cuh>
#include <h2expr/detail/primitives/cuda/qr.cuh>
#include <h2expr/detail/primitives/cuda/random.cuh>
#include <h2expr/detail/primitives/cuda/svd.cuh>
#include <h2expr/detail/primitives/cuda/trsm.cuh>
#elif defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#endif

namespace h2expr::detail {

// The backend contract: every batched primitive exists for both spaces, called with the same
// arguments (the CUDA space's declarations: cuda/primitives.hpp). Checked below for each space this
// translation unit can use, so a primitive added to one backend only fails to compile here, by name.
template <class Space, class T>
concept batched_backend = requires(context<Space>& c, op o, side sd, uplo ul, diag dg, distribution dist, int i,
                                   std::int64_t i64, std::size_t n, std::uint64_t seed, double x, T a, T* p,
                                   const T* cp, T* const* ptrs, const T* const* cptrs, const int* ints,
                                   int* iout, int* const* perms, double* const* dptrs,
                                   const double* const* cdptrs, bsr_shape shape, const block_points<T>& points,
                                   const ::h2expr::kernels::exponential& kernel, const hisparse::tree_view& tree,
                                   bool flag) {
  copy_batched(c, i, i, cptrs, i, ptrs, i, i, ints);
  copy_vbatched(c, o, ints, ints, cptrs, ints, ptrs, ints, i);
  axpy(c, n, a, cp, p);
  axpby_2d(c, n, n, a, cp, n, a, p, n, cp);
  add_to_diagonals(c, i, i, a, cp, ints, p);
  fill(c, p, n, a);
  scale_2d(c, i64, i64, a, p, i64);
  fill_random(c, dist, i64, i64, p, i64, seed);
  fill_random_vbatched(c, dist, ints, ints, ptrs, ints, seed, i, i, i);
  gemm_batched(c, o, o, i, i, i, a, cptrs, i, cptrs, i, a, ptrs, i, i);
  gemm_strided_batched(c, o, o, i, i, i, a, cp, i, i64, cp, i, i64, a, p, i, i64, i);
  gemm_vbatched(c, o, o, ints, ints, ints, a, cptrs, ints, cptrs, ints, a, ptrs, ints, i, i, i, i);
  qr_vbatched(c, ints, ints, ptrs, ints, ptrs, ints, i, i, i);
  qr_r_vbatched(c, ints, ints, ptrs, ints, ptrs, ints, i, i, i);
  cpqr_vbatched(c, ints, ints, ptrs, ints, ptrs, ints, perms, iout, a, i, i, i);
  svd_vbatched(c, ints, ints, ptrs, ints, ptrs, ptrs, ints, i, i, i);
  svd_right_vbatched(c, ints, ints, ptrs, ints, ptrs, ptrs, ints, i, i, i, x);
  potrf_vbatched(c, ints, ptrs, ints, iout, i, i);
  potrf_batched(c, i, ptrs, i, iout, i);
  gram_vbatched(c, ints, ints, cptrs, ints, dptrs, ints, i, i, i);
  cholqr_factor_vbatched(c, ints, cdptrs, ints, ptrs, ints, dptrs, dptrs, x, iout, i, i);
  trsm_batched(c, sd, ul, o, dg, i, i, a, cptrs, i, ptrs, i, i);
  trsm_vbatched(c, sd, ul, o, dg, ints, ints, a, cptrs, ints, ptrs, ints, i, i, i);
  bsr_gemm(c, o, i, ints, ints, ints, cp, i, i, i64, cp, i64, p, i64, i, a, shape);
  hisparse_multiply(c, tree, flag, a, cp, i64, a, p, i64, i);
  gather_rows(c, ints, i64, cp, i64, p, i64, i);
  scatter_rows(c, ints, i64, cp, i64, p, i64, i, a, a);
  all_finite(c, cp, n);
  sum_of_squares(c, cp, n);
  evaluate_blocks<T, 2>(c, kernel, points, p);
};

// Whether a backend's SVD pays for a QR of each item first (batch.hpp's svd() then factors R^T, which
// is square and, for the graded spectra that compression and HARA factor, nearly orthogonal in its
// columns). The CUDA backend's one-sided Jacobi took about 20 sweeps over A's m rows where it takes 7-9
// over R^T's n (a host emulation of the kernel, 8 items of 128-240 x 40-68, singular values 1 down
// to 1e-6 .. 1e-16, 2026-12-04). The host's LAPACK and Eigen SVDs reduce to bidiagonal form themselves.
template <class Space>
inline constexpr bool svd_after_qr_pays = false;
template <>
inline constexpr bool svd_after_qr_pays<cuda> = true;

static_assert(batched_backend<host, float> && batched_backend<host, double>);
#if defined(H2EXPR_CUDA_SPACE)
static_assert(batched_backend<cuda, float> && batched_backend<cuda, double>);
#endif

}  // namespace h2expr::detail
