#pragma once
// The CUDA backend's contract: every primitive of the CUDA space that launches a kernel (or calls a
// batched cuBLAS/cuSOLVER routine), declared for context<cuda> with the host backend's parameters.
// The .cuh files beside this one define them, and see these declarations first, so a definition that
// drifts from its declaration is a second overload that no caller reaches: the build of a program in
// the mode below fails to link.
//
// A CUDA translation unit (nvcc) includes the definitions and instantiates what it uses, as for any
// header-only code. A C++ translation unit may use the CUDA space too when it defines
// H2EXPR_CUDA_PRIMITIVES_EXTERN: it sees only these declarations (and the host-side code of the space:
// context, memory, cuSPARSE objects), and the program links a CUDA translation unit that instantiates
// the primitives explicitly (the project's tests do this: tests/instances/primitives_cuda.cu, with the
// lists in tests/instances/primitives.hpp as a template), and links h2expr::cuda. The algorithms, written
// once over both spaces, then compile with the host compiler alone. Only what that translation unit
// instantiates links: evaluate_blocks_on_device for each (scalar, dimension, built-in kernel) used, and
// a kernel of the user's own marked device_callable needs a CUDA translation unit.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/primitives/bsr_shape.hpp>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/core/cuda/memory.cuh>  // host calls: allocation, copies, transfers
#include <h2expr/detail/primitives/block_points.hpp>  // the layout, and the host's evaluation of host-only kernels
#include <h2expr/detail/primitives/hisparse_format.hpp>
#include <h2expr/detail/primitives/kernels.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

// elementwise.cuh: batched copies and element-wise updates (allocation and plain copies: memory.cuh)
template <class T>
void copy_batched(context<cuda>& c, int rows, int cols, const T* const* src, int lds, T* const* dst, int ldd,
                  int count, const int* item_cols = nullptr);
template <class T>
void copy_vbatched(context<cuda>& c, op trans, const int* rows, const int* cols, const T* const* src, const int* lds,
                   T* const* dst, const int* ldd, int count);
template <class T>
void axpy(context<cuda>& c, std::size_t n, T alpha, const T* x, T* y);
template <class T>
void axpby_2d(context<cuda>& c, std::size_t rows, std::size_t cols, T alpha, const T* x, std::size_t ldx, T beta, T* y,
              std::size_t ldy, const T* d = nullptr);
template <class T>
void add_to_diagonals(context<cuda>& c, int count, int m, T alpha, const T* d, const int* block, T* blocks);
template <class T>
void fill(context<cuda>& c, T* data, std::size_t n, T value);
template <class T>
void scale_2d(context<cuda>& c, std::int64_t rows, std::int64_t cols, T beta, T* Y, std::int64_t ldy);  // Y = beta Y

// random.cuh
template <class T>
void fill_random(context<cuda>& c, distribution d, std::int64_t rows, std::int64_t cols, T* A, std::int64_t lda,
                 std::uint64_t seed);
template <class T>
void fill_random_vbatched(context<cuda>& c, distribution d, const int* m, const int* n, T* const* A,
                          const int* lda, std::uint64_t seed, int count, int max_m, int max_n);

// gemm.cuh
template <class T>
void gemm_batched(context<cuda>& c, op ta, op tb, int m, int n, int k, T alpha, const T* const* A, int lda,
                  const T* const* B, int ldb, T beta, T* const* C, int ldc, int count);
template <class T>
void gemm_strided_batched(context<cuda>& c, op ta, op tb, int m, int n, int k, T alpha, const T* A, int lda,
                          std::int64_t stride_a, const T* B, int ldb, std::int64_t stride_b, T beta, T* C, int ldc,
                          std::int64_t stride_c, int count);
template <class T>
void gemm_vbatched(context<cuda>& c, op ta, op tb, const int* m, const int* n, const int* k, T alpha,
                   const T* const* A, const int* lda, const T* const* B, const int* ldb, T beta, T* const* C,
                   const int* ldc, int count, int max_m, int max_n, int max_k);

// qr.cuh
template <class T>
void qr_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                 const int* ldr, int count, int max_m, int max_n);
template <class T>
void qr_r_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                   const int* ldr, int count, int max_m, int max_n);
template <class T>
void cpqr_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* R,
                   const int* ldr, int* const* perm, int* rank, T rel_tol, int count, int max_m, int max_n);

// svd.cuh
template <class T>
void svd_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                  T* const* V, const int* ldv, int count, int max_m, int max_n);
template <class T>
void svd_right_vbatched(context<cuda>& c, const int* m, const int* n, T* const* A, const int* lda, T* const* S,
                        T* const* V, const int* ldv, int count, int max_m, int max_n, double resolve);

// cholesky.cuh, cholesky_qr.cuh
template <class T>
void potrf_vbatched(context<cuda>& c, const int* n, T* const* A, const int* lda, int* info, int count, int max_n);
template <class T>
void potrf_batched(context<cuda>& c, int n, T* const* A, int lda, int* info, int count);
template <class T>
void gram_vbatched(context<cuda>& c, const int* m, const int* n, const T* const* A, const int* lda, double* const* G,
                   const int* ldg, int count, int max_m, int max_n);
template <class T>
void cholqr_factor_vbatched(context<cuda>& c, const int* n, const double* const* G, const int* ldg, T* const* W,
                            const int* ldw, double* const* d, double* const* norms, double drop, int* info, int count,
                            int max_n);

// trsm.cuh
template <class T>
void trsm_batched(context<cuda>& c, side s, uplo ul, op trans, diag dg, int m, int n, T alpha, const T* const* A,
                  int lda, T* const* B, int ldb, int count);
template <class T>
void trsm_vbatched(context<cuda>& c, side s, uplo ul, op trans, diag dg, const int* m, const int* n, T alpha,
                   const T* const* A, const int* lda, T* const* B, const int* ldb, int count, int max_m,
                   int max_n);

// bsr.cuh
template <class T>
void bsr_gemm(context<cuda>& c, op block_op, int rows, const int* ptr, const int* idx, const int* blk,
              const T* blocks, int mb, int nb, std::int64_t block_stride, const T* X, std::int64_t ldx, T* Y,
              std::int64_t ldy, int nv, T beta, bsr_shape shape = {});
template <class T>
void gather_rows(context<cuda>& c, const int* src, std::int64_t rows, const T* X, std::int64_t ldx, T* Xp,
                 std::int64_t ldp, int nv);
template <class T>
void scatter_rows(context<cuda>& c, const int* dst, std::int64_t rows, const T* Yp, std::int64_t ldp, T* Y,
                  std::int64_t ldy, int nv, T alpha = T(1), T beta = T(0));

// hisparse.cuh: a HiSparse tree (or its transpose) times a block of vectors
template <class T>
void hisparse_multiply(context<cuda>& c, const hisparse::tree_view& h, bool trans, T alpha, const T* X,
                       std::int64_t ldx, T beta, T* Y, std::int64_t ldy, int nv);

// evaluate.cuh: the entries of a built-in kernel on the device; finiteness and norms of device data
template <class T, int D, class Kernel>
void evaluate_blocks_on_device(context<cuda>& c, const Kernel& kernel, const block_points<T>& p, T* out);
template <class T>
bool all_finite(context<cuda>& c, const T* data, std::size_t n);
template <class T>
double sum_of_squares(context<cuda>& c, const T* data, std::size_t n);

// Kernel entries of many blocks (block_points.hpp's layout): built-in kernels on the device; any other
// callable on the host, copied over (a host lambda cannot run on the device).
template <class T, int D, class Kernel>
void evaluate_blocks(context<cuda>& c, const Kernel& kernel, const block_points<T>& p, T* out) {
  if (p.blocks() == 0 || p.row_stride == 0 || p.col_stride == 0) return;
  if constexpr (is_device_kernel<Kernel>::value) {
    evaluate_blocks_on_device<T, D>(c, kernel, p, out);
  } else {
    std::vector<T> values(std::size_t(p.row_stride) * p.col_stride * p.blocks());
    evaluate_blocks_into<T, D>(kernel, p, values.data());
    upload_2d(c, values.size(), 1, values.data(), values.size(), out, values.size());
  }
}

}  // namespace h2expr::detail
