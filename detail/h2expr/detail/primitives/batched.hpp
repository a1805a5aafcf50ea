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
//   marshal_strided / marshal_offsets    pointer arrays of batch items
//   bsr_gemm         block-sparse rows times a block vector (coupling and dense phases of HGEMV)
//   gather_rows / scatter_rows           user order <-> padded tree order
//   evaluate_blocks / all_finite / sum_of_squares   kernel entries of many blocks; finiteness, norms
// The host backend is the reference semantics; the CUDA backend matches it (see tests/).
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/host/bsr.hpp>
#include <h2expr/detail/primitives/host/cholesky.hpp>
#include <h2expr/detail/primitives/host/cholesky_qr.hpp>
#include <h2expr/detail/primitives/host/evaluate.hpp>
#include <h2expr/detail/primitives/host/gemm.hpp>
#include <h2expr/detail/primitives/host/marshal.hpp>
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
#include <h2expr/detail/primitives/cuda/marshal.cuh>
#include <h2expr/detail/primitives/cuda/qr.cuh>
#include <h2expr/detail/primitives/cuda/random.cuh>
#include <h2expr/detail/primitives/cuda/svd.cuh>
#include <h2expr/detail/primitives/cuda/trsm.cuh>
#elif defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/primitives/cuda/primitives.hpp>
#endif
