#pragma once
// Sparse kernels of the CUDA space, on cuSPARSE's generic API: CSR times a block of vectors (SpMM)
// and the triangular solves with a sparse Cholesky factor (SpSM). Same semantics as host/sparse.hpp.
#include <h2expr/detail/primitives/batched.hpp>  // gather_rows, scatter_rows, scale_2d
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/core/cuda/check.cuh>
#include <h2expr/detail/core/cuda/context.cuh>
#include <h2expr/detail/core/cuda/memory.cuh>
#include <h2expr/detail/core/workspace.hpp>
#include <h2expr/detail/primitives/csr.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr::detail {

template <class T>
inline constexpr cudaDataType cusparse_value_type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;

// A cuSPARSE descriptor that destroys itself (statuses ignored: destructors must not throw).
template <class Handle, auto Destroy>
class cusparse_object {
 public:
  cusparse_object() = default;
  cusparse_object(const cusparse_object&) = delete;
  cusparse_object& operator=(const cusparse_object&) = delete;
  ~cusparse_object() {
    if (h_) (void)Destroy(h_);
  }
  Handle* out() { return &h_; }  // for the create call
  Handle get() const { return h_; }

 private:
  Handle h_ = nullptr;
};
using cusparse_sp_mat = cusparse_object<cusparseSpMatDescr_t, cusparseDestroySpMat>;
using cusparse_const_sp_mat = cusparse_object<cusparseConstSpMatDescr_t, cusparseDestroySpMat>;
using cusparse_dn_mat = cusparse_object<cusparseDnMatDescr_t, cusparseDestroyDnMat>;
using cusparse_const_dn_mat = cusparse_object<cusparseConstDnMatDescr_t, cusparseDestroyDnMat>;
using cusparse_spsm = cusparse_object<cusparseSpSMDescr_t, cusparseSpSM_destroyDescr>;

// Y(0:rows, 0:nv) = alpha A X + beta Y for a rows x cols CSR A (beta == 0 does not read Y).
template <class T>
void csr_multiply(context<cuda>& c, std::int64_t rows, std::int64_t cols, std::int64_t nnz, const int* ptr,
                  const int* idx, const T* val, T alpha, const T* X, std::int64_t ldx, T beta, T* Y,
                  std::int64_t ldy, int nv) {
  if (rows == 0 || nv == 0) return;
  // Y is zeroed first when beta == 0: SpMM then reads zeros, never the NaN garbage of a new output.
  if (beta == T(0)) scale_2d(c, rows, nv, T(0), Y, ldy);
  if (nnz == 0 || cols == 0) {  // cuSPARSE rejects empty operands: the product is zero
    if (beta != T(0)) scale_2d(c, rows, nv, beta, Y, ldy);
    return;
  }
  constexpr cudaDataType type = cusparse_value_type<T>;
  cusparse_const_sp_mat A;
  cusparse_const_dn_mat B;
  cusparse_dn_mat C;
  H2EXPR_CUSPARSE(cusparseCreateConstCsr(A.out(), rows, cols, nnz, ptr, idx, val, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, type));
  H2EXPR_CUSPARSE(cusparseCreateConstDnMat(B.out(), cols, nv, ldx, X, type, CUSPARSE_ORDER_COL));
  H2EXPR_CUSPARSE(cusparseCreateDnMat(C.out(), rows, nv, ldy, Y, type, CUSPARSE_ORDER_COL));
  const auto none = CUSPARSE_OPERATION_NON_TRANSPOSE;
  std::size_t bytes = 0;
  H2EXPR_CUSPARSE(cusparseSpMM_bufferSize(c.sparse(), none, none, &alpha, A.get(), B.get(), &beta, C.get(), type,
                                          CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
  workspace_plan plan;
  const auto work = plan.add<std::byte>(bytes);
  const workspace<cuda> ws(c, plan);
  H2EXPR_CUSPARSE(cusparseSpMM(c.sparse(), none, none, &alpha, A.get(), B.get(), &beta, C.get(), type,
                               CUSPARSE_SPMM_ALG_DEFAULT, bytes ? ws[work] : nullptr));
}

// The CUDA factor: L and L^T as CSR, both solved NON_TRANSPOSE by SpSM (far faster in cuSPARSE than
// a transposed solve with L), and the permutation applied by gather/scatter of rows. SpSM's analysis
// depends on the dense operands, so it is kept per number of vectors (a few at most) together with
// its buffers; the two n x nv work blocks are shared and grown on demand. Not for two threads at once.
template <class T>
class cholesky_factor<T, cuda> {
 public:
  cholesky_factor(context_ptr<cuda> ctx, std::int64_t n, const std::vector<int>& src, const host_csr<T>& lt)
      : ctx_(std::move(ctx)), n_(n), src_(ctx_, src) {
    lower_.upload(ctx_, transposed(lt), CUSPARSE_FILL_MODE_LOWER);
    upper_.upload(ctx_, lt, CUSPARSE_FILL_MODE_UPPER);
  }
  cholesky_factor(const cholesky_factor&) = delete;
  cholesky_factor& operator=(const cholesky_factor&) = delete;
  ~cholesky_factor() {
    // cuSPARSE may free memory of its descriptors at once: let the solves using them finish.
    if (ctx_) (void)cudaStreamSynchronize(ctx_->stream());
  }

  std::size_t memory_bytes() const {
    return src_.size() * sizeof(int) + lower_.memory_bytes() + upper_.memory_bytes();
  }
  std::size_t workspace_bytes() const {
    std::size_t bytes = (x1_.size() + x2_.size()) * sizeof(T);
    for (const auto& [nv, a] : analyses_) bytes += a->lower_buffer.size() + a->upper_buffer.size();
    return bytes;
  }

  // out = S^{-1} in for nv vectors (in and out column-major on the factor's stream; the same block is fine).
  void solve(const T* in, std::int64_t ldi, T* out, std::int64_t ldo, int nv) {
    if (n_ == 0 || nv == 0) return;
    context<cuda>& c = *ctx_;
    const analysis& a = prepare(nv);
    const T one = 1;
    const auto none = CUSPARSE_OPERATION_NON_TRANSPOSE;
    constexpr cudaDataType type = cusparse_value_type<T>;
    gather_rows(c, src_.data(), n_, in, ldi, x1_.data(), n_, nv);
    H2EXPR_CUSPARSE(cusparseSpSM_solve(c.sparse(), none, none, &one, lower_.descr.get(), a.x1.get(), a.x2.get(), type,
                                       CUSPARSE_SPSM_ALG_DEFAULT, a.lower.get()));
    H2EXPR_CUSPARSE(cusparseSpSM_solve(c.sparse(), none, none, &one, upper_.descr.get(), a.x2.get(), a.x1.get(), type,
                                       CUSPARSE_SPSM_ALG_DEFAULT, a.upper.get()));
    scatter_rows(c, src_.data(), n_, x1_.data(), n_, out, ldo, nv);
  }

 private:
  // One triangle as CSR (non-unit diagonal stored), with its cuSPARSE descriptor.
  struct triangle {
    buffer<int, cuda> ptr, idx;
    buffer<T, cuda> val;
    cusparse_sp_mat descr;
    void upload(const context_ptr<cuda>& ctx, const host_csr<T>& h, cusparseFillMode_t fill) {
      ptr = buffer<int, cuda>(ctx, h.ptr);
      idx = buffer<int, cuda>(ctx, h.idx);
      val = buffer<T, cuda>(ctx, h.val);
      if (h.rows == 0) return;
      H2EXPR_CUSPARSE(cusparseCreateCsr(descr.out(), h.rows, h.cols, h.nnz(), ptr.data(), idx.data(), val.data(),
                                        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                        cusparse_value_type<T>));
      cusparseDiagType_t diag = CUSPARSE_DIAG_TYPE_NON_UNIT;
      H2EXPR_CUSPARSE(cusparseSpMatSetAttribute(descr.get(), CUSPARSE_SPMAT_FILL_MODE, &fill, sizeof(fill)));
      H2EXPR_CUSPARSE(cusparseSpMatSetAttribute(descr.get(), CUSPARSE_SPMAT_DIAG_TYPE, &diag, sizeof(diag)));
    }
    std::size_t memory_bytes() const { return (ptr.size() + idx.size()) * sizeof(int) + val.size() * sizeof(T); }
  };
  // SpSM's analysis of both triangles for one number of vectors: L x2 = x1, then L^T x1 = x2.
  struct analysis {
    cusparse_dn_mat x1, x2;
    cusparse_spsm lower, upper;
    buffer<unsigned char, cuda> lower_buffer, upper_buffer;
  };
  static constexpr std::size_t max_analyses = 8;

  const analysis& prepare(int nv) {
    if (auto it = analyses_.find(nv); it != analyses_.end()) return *it->second;
    if (std::size_t(n_) * nv > x1_.size() || analyses_.size() >= max_analyses) {
      // The analyses refer to the work blocks: drop them (after the solves using them) before regrowing.
      ctx_->synchronize();
      analyses_.clear();
      if (std::size_t(n_) * nv > x1_.size()) {
        x1_ = buffer<T, cuda>();
        x2_ = buffer<T, cuda>();
        x1_ = buffer<T, cuda>(ctx_, std::size_t(n_) * nv);
        x2_ = buffer<T, cuda>(ctx_, std::size_t(n_) * nv);
      }
    }
    context<cuda>& c = *ctx_;
    constexpr cudaDataType type = cusparse_value_type<T>;
    const auto none = CUSPARSE_OPERATION_NON_TRANSPOSE;
    const T one = 1;
    auto a = std::make_unique<analysis>();
    H2EXPR_CUSPARSE(cusparseCreateDnMat(a->x1.out(), n_, nv, n_, x1_.data(), type, CUSPARSE_ORDER_COL));
    H2EXPR_CUSPARSE(cusparseCreateDnMat(a->x2.out(), n_, nv, n_, x2_.data(), type, CUSPARSE_ORDER_COL));
    auto analyse = [&](const triangle& t, cusparse_spsm& d, buffer<unsigned char, cuda>& buf,
                       cusparseDnMatDescr_t b, cusparseDnMatDescr_t x) {
      H2EXPR_CUSPARSE(cusparseSpSM_createDescr(d.out()));
      std::size_t bytes = 0;
      H2EXPR_CUSPARSE(cusparseSpSM_bufferSize(c.sparse(), none, none, &one, t.descr.get(), b, x, type,
                                              CUSPARSE_SPSM_ALG_DEFAULT, d.get(), &bytes));
      buf = buffer<unsigned char, cuda>(ctx_, std::max<std::size_t>(bytes, 1));
      H2EXPR_CUSPARSE(cusparseSpSM_analysis(c.sparse(), none, none, &one, t.descr.get(), b, x, type,
                                            CUSPARSE_SPSM_ALG_DEFAULT, d.get(), buf.data()));
    };
    analyse(lower_, a->lower, a->lower_buffer, a->x1.get(), a->x2.get());
    analyse(upper_, a->upper, a->upper_buffer, a->x2.get(), a->x1.get());
    return *analyses_.emplace(nv, std::move(a)).first->second;
  }

  context_ptr<cuda> ctx_;  // first: destroyed last
  std::int64_t n_ = 0;
  buffer<int, cuda> src_;
  triangle lower_, upper_;
  buffer<T, cuda> x1_, x2_;
  std::map<int, std::unique_ptr<analysis>> analyses_;  // after the work blocks they refer to
};

}  // namespace h2expr::detail
