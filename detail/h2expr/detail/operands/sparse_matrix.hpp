#pragma once
// sparse_matrix<T, Space>: an immutable CSR matrix (int indices) in a space's memory, the sparse
// operand of expressions (A21 * solve(cholesky(A11)) * A12). Built from host CSR arrays or an Eigen
// sparse matrix; copies share the storage. S^T is stored as well, so that S X and S^T X are both
// row-parallel products.
//
//   auto S = hx::sparse_matrix<double>::from_csr(rows, cols, row_ptr, col_idx, values);
//   S.multiply(hx::op::none, 1.0, X.view(), 0.0, Y.view());              // Y = S X
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/buffer.hpp>
#include <h2expr/detail/primitives/host/sparse.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/view.hpp>
#if defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/primitives/cuda/sparse.cuh>
#endif

#include <Eigen/SparseCore>
#include <climits>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {

template <class T, class Space = host>
class sparse_matrix : public detail::values_in_space<T, Space> {
 public:
  // rows x cols from host CSR arrays: row_ptr (rows + 1 entries, from 0 up to nnz), col_idx and
  // values (nnz entries each). Columns may come unsorted within a row, and a (row, column) given
  // more than once is the sum of its values (the assembly convention). Explicit zeros are kept.
  static sparse_matrix from_csr(index rows, index cols, const std::vector<int>& row_ptr,
                                const std::vector<int>& col_idx, const std::vector<T>& values,
                                ::h2expr::context_ptr<Space> ctx = default_context<Space>()) {
    detail::check_csr_arrays("sparse_matrix::from_csr", rows, cols, row_ptr, col_idx, values);
    return sparse_matrix(detail::canonical_csr(rows, cols, row_ptr, col_idx, values), std::move(ctx));
  }
  // A copy of an Eigen sparse matrix (either storage order; explicit zeros are kept).
  template <int Options, class StorageIndex>
  static sparse_matrix from_eigen(const Eigen::SparseMatrix<T, Options, StorageIndex>& S,
                                  ::h2expr::context_ptr<Space> ctx = default_context<Space>()) {
    const auto a = detail::csr_of_eigen(S, "sparse_matrix");
    return from_csr(a.rows, a.cols, a.ptr, a.idx, a.val, std::move(ctx));
  }
  template <int Options, class StorageIndex>
  explicit sparse_matrix(const Eigen::SparseMatrix<T, Options, StorageIndex>& S,
                         ::h2expr::context_ptr<Space> ctx = default_context<Space>())
      : sparse_matrix(from_eigen(S, std::move(ctx))) {}

  index rows() const { return s_->a.rows; }
  index cols() const { return s_->a.cols; }
  index nnz() const { return s_->a.nnz; }
  const ::h2expr::context_ptr<Space>& context_ptr() const { return s_->ctx; }
  ::h2expr::context<Space>& context() const { return *s_->ctx; }

  // Exactly symmetric, pattern and values (computed once, at construction).
  bool symmetric() const { return s_->symmetric; }
  // Whether this matrix is exactly other^T (e.g. A21 == A12^T, so A21 X A12 is symmetric).
  bool is_transpose_of(const sparse_matrix& other) const {
    if (s_ == other.s_) return symmetric();
    if (rows() != other.cols() || cols() != other.rows() || nnz() != other.nnz()) return false;
    if (s_->a.hash != other.s_->at.hash) return false;
    return same(s_->a, other.s_->at);
  }

  // A host copy.
  Eigen::SparseMatrix<T> to_eigen() const {
    // The stored S^T in CSR is S in CSC: Eigen's own layout.
    const auto& at = s_->at;
    const std::vector<int> ptr = at.ptr.to_host(), idx = at.idx.to_host();
    const std::vector<T> val = at.val.to_host();
    return Eigen::SparseMatrix<T>(Eigen::Map<const Eigen::SparseMatrix<T>>(
        rows(), cols(), nnz(), ptr.data(), idx.empty() ? nullptr : idx.data(), val.empty() ? nullptr : val.data()));
  }

  // Storage of S and S^T in the space.
  std::size_t memory_bytes() const { return s_->a.memory_bytes() + s_->at.memory_bytes(); }

  // out = alpha op(S) in + beta out (beta == 0 overwrites out, whatever it holds). in and out must
  // not overlap.
  void multiply(detail::op trans, T alpha, const_view<T, Space> in, T beta, view<T, Space> out) const {
    const auto& m = trans == detail::op::none ? s_->a : s_->at;
    detail::require<dimension_mismatch>(
        in.rows() == m.cols && out.rows() == m.rows && in.cols() == out.cols(),
        std::string("sparse_matrix::multiply: ") + (trans == detail::op::none ? "S" : "S^T") + " is " +
            std::to_string(m.rows) + " x " + std::to_string(m.cols) + ", in is " + std::to_string(in.rows()) + " x " +
            std::to_string(in.cols()) + ", out is " + std::to_string(out.rows()) + " x " + std::to_string(out.cols()));
    detail::require(in.cols() <= INT_MAX, "sparse_matrix::multiply: too many vectors");
    if (out.rows() == 0 || out.cols() == 0) return;
    detail::csr_multiply(*s_->ctx, m.rows, m.cols, m.nnz, m.ptr.data(), m.idx.data(), m.val.data(), alpha, in.data(),
                         in.ld(), beta, out.data(), out.ld(), int(in.cols()));
  }

 private:
  // One CSR matrix in the space.
  struct csr {
    index rows = 0, cols = 0, nnz = 0;
    detail::buffer<int, Space> ptr, idx;
    detail::buffer<T, Space> val;
    std::uint64_t hash = 0;
    csr(const ::h2expr::context_ptr<Space>& ctx, const detail::host_csr<T>& h)
        : rows(h.rows), cols(h.cols), nnz(h.nnz()), ptr(ctx, h.ptr), idx(ctx, h.idx), val(ctx, h.val),
          hash(detail::fingerprint(h)) {}
    std::size_t memory_bytes() const { return (ptr.size() + idx.size()) * sizeof(int) + val.size() * sizeof(T); }
  };
  struct state {
    ::h2expr::context_ptr<Space> ctx;
    csr a, at;  // S and S^T
    bool symmetric = false;
  };

  sparse_matrix(const detail::host_csr<T>& a, ::h2expr::context_ptr<Space> ctx) {
    detail::require(ctx != nullptr, "sparse_matrix: no context");
    for (T v : a.val)  // duplicates summed may overflow
      detail::require<non_finite_value>(std::isfinite(v), "sparse_matrix: duplicate entries sum to infinity");
    const detail::host_csr<T> at = detail::transposed(a);
    const bool symmetric = a.rows == a.cols && detail::same_csr(a, at);
    s_ = std::make_shared<const state>(state{ctx, csr(ctx, a), csr(ctx, at), symmetric});
  }

  static bool same(const csr& x, const csr& y) {
    if constexpr (detail::space_traits<Space>::host_memory) {
      return detail::same_csr(x.rows, x.cols, x.ptr.data(), x.idx.data(), x.val.data(), y.rows, y.cols, y.ptr.data(),
                              y.idx.data(), y.val.data());
    } else {
      const auto xp = x.ptr.to_host(), xi = x.idx.to_host(), yp = y.ptr.to_host(), yi = y.idx.to_host();
      const auto xv = x.val.to_host(), yv = y.val.to_host();
      return detail::same_csr(x.rows, x.cols, xp.data(), xi.data(), xv.data(), y.rows, y.cols, yp.data(), yi.data(),
                              yv.data());
    }
  }

  std::shared_ptr<const state> s_;
};

}  // namespace h2expr
