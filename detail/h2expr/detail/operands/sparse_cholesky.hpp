#pragma once
// sparse_cholesky<T, Space>: P S P^T = L L^T for a sparse symmetric positive definite S, and solves
// with whole blocks of vectors: the inverse in expressions such as
// A22 - A21 * solve(cholesky(A11)) * A12. Both spaces factor on the host: with CHOLMOD's supernodal
// factorization where the build found SuiteSparse (H2EXPR_HAS_CHOLMOD; CMake option
// H2EXPR_USE_CHOLMOD, GPL-licensed), else with Eigen's simplicial LLT and an AMD ordering (the same
// API and errors, much slower on 3D problems). The factor then moves to the space, where the solves run.
//
//   auto F = hx::cholesky(S);        // not_positive_definite if S is indefinite or singular
//   F.solve(B.view(), X.view());     // X = S^{-1} B
//
// Copies share the factor and its solve workspace: a factor (or its copies) must not be used by two
// threads at once.
#include <h2expr/detail/core/context.hpp>
#include <h2expr/detail/primitives/host/sparse.hpp>
#if defined(H2EXPR_HAS_CHOLMOD)
#include <h2expr/detail/primitives/host/cholmod.hpp>
#else
#include <Eigen/SparseCholesky>
#endif
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/operands/sparse_matrix.hpp>
#include <h2expr/detail/core/view.hpp>
#if defined(H2EXPR_CUDA_SPACE)
#include <h2expr/detail/primitives/cuda/sparse.cuh>
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {

template <class T, class Space = host>
class sparse_cholesky : public detail::values_in_space<T, Space> {
 public:
  // Factors S: dimension_mismatch if it is not square, invalid_argument if it is not exactly
  // symmetric, not_positive_definite if a pivot is not positive or the pivots show S singular to
  // double precision (smallest squared pivot <= n eps times the largest). 0 x 0 is fine.
  explicit sparse_cholesky(const sparse_matrix<T, Space>& S) : s_(std::make_shared<state>()) {
    detail::require<dimension_mismatch>(S.rows() == S.cols(), "cholesky: the matrix is " + std::to_string(S.rows()) +
                                                                  " x " + std::to_string(S.cols()) + ", not square");
    detail::require(S.symmetric(), "cholesky: the matrix is not symmetric");
    const auto start = std::chrono::steady_clock::now();
    s_->ctx = S.context_ptr();
    s_->n = S.rows();
    if (s_->n > 0) {
      std::vector<int> src;
      detail::host_csr<T> lt;
      factor_on_host(S.to_eigen(), src, lt);
      s_->factor_nnz = std::size_t(lt.nnz());
      s_->factor = std::make_unique<detail::cholesky_factor<T, Space>>(s_->ctx, s_->n, std::move(src), lt);
    }
    s_->seconds = detail::seconds_since(*s_->ctx, start);
  }

  index rows() const { return s_->n; }
  index cols() const { return s_->n; }
  // Entries of L, the diagonal included.
  std::size_t factor_nnz() const { return s_->factor_nnz; }
  // Storage of the factor in the space (L, its copy as L^T on CUDA, the permutation); the solve
  // workspaces, grown on demand, are not counted.
  std::size_t memory_bytes() const { return s_->factor ? s_->factor->memory_bytes() : 0; }
  // Which factorization the build uses: "CHOLMOD supernodal" or "Eigen simplicial".
  static constexpr const char* method() {
#if defined(H2EXPR_HAS_CHOLMOD)
    return "CHOLMOD supernodal";
#else
    return "Eigen simplicial";
#endif
  }
  // Wall time of the factorization: ordering, numeric factorization, and the move into the space.
  double factor_seconds() const { return s_->seconds; }
  const ::h2expr::context_ptr<Space>& context_ptr() const { return s_->ctx; }

  // out = S^{-1} in, all the vectors in one sweep over the factor. in and out must not overlap,
  // except by being the same block.
  void solve(const_view<T, Space> in, view<T, Space> out) const {
    const index n = s_->n;
    detail::require<dimension_mismatch>(in.rows() == n && out.rows() == n && in.cols() == out.cols(),
                                        "cholesky solve: the matrix is " + std::to_string(n) + " x " +
                                            std::to_string(n) + ", in is " + std::to_string(in.rows()) + " x " +
                                            std::to_string(in.cols()) + ", out is " + std::to_string(out.rows()) +
                                            " x " + std::to_string(out.cols()));
    detail::require(in.cols() <= INT_MAX, "cholesky solve: too many vectors");
    if (n == 0 || in.cols() == 0) return;
    s_->factor->solve(in.data(), in.ld(), out.data(), out.ld(), int(in.cols()));
  }

 private:
  struct state {
    ::h2expr::context_ptr<Space> ctx;
    index n = 0;
    std::size_t factor_nnz = 0;
    double seconds = 0;
    std::unique_ptr<detail::cholesky_factor<T, Space>> factor;  // none for 0 x 0
  };

  // P A P^T = L L^T; src[j] = the row of A that becomes row j, lt = L^T as CSR (the columns of L,
  // each with its diagonal first).
  static void factor_on_host(const Eigen::SparseMatrix<T>& A, std::vector<int>& src, detail::host_csr<T>& lt) {
    const index n = A.rows();
    const std::string what = "cholesky: the " + std::to_string(n) + " x " + std::to_string(n) +
                             " matrix is not symmetric positive definite";
    // Factored in double for float data too (as ARA's Cholesky): the float factor is then accurate to
    // float, and the singularity test below reads double pivots, whose rounding (~n eps of double)
    // stays far from the smallest pivot of an SPD matrix of any size we can store.
    Eigen::SparseMatrix<double, Eigen::ColMajor, int> Ad = A.template cast<double>();
    Ad.makeCompressed();
    // A positive definite matrix has a positive diagonal (a missing entry would also leave CHOLMOD's
    // input without values).
    for (index j = 0; j < n; ++j)
      detail::require<not_positive_definite>(Ad.coeff(j, j) > 0, what + " (diagonal entry " + std::to_string(j) +
                                                                     " is not positive)");
#if defined(H2EXPR_HAS_CHOLMOD)
    const detail::cholmod_llt llt(Ad, what);
    take_factor(n, llt.perm(), llt.col_ptr(), llt.row_idx(), llt.values(), what, src, lt);
#else
    Eigen::SimplicialLLT<Eigen::SparseMatrix<double>, Eigen::Lower, Eigen::AMDOrdering<int>> llt(Ad);
    detail::require<not_positive_definite>(llt.info() == Eigen::Success, what + " (a pivot is not positive)");
    const auto& pinv = llt.permutationPinv().indices();  // empty when Eigen did no ordering
    const Eigen::SparseMatrix<double>& L = llt.matrixL().nestedExpression();
    detail::require(L.isCompressed(), "cholesky: internal: Eigen's factor is not compressed");
    take_factor(n, pinv.size() == n ? pinv.data() : nullptr, L.outerIndexPtr(), L.innerIndexPtr(), L.valuePtr(),
                what, src, lt);
#endif
  }

  // Copies L (columns ptr/idx/val, diagonal first; perm[k] the row of A that is row k, or none for
  // the identity) into src and lt, checking its pivots: positive, and not showing S singular.
  static void take_factor(index n, const int* perm, const int* ptr, const int* idx, const double* val,
                          const std::string& what, std::vector<int>& src, detail::host_csr<T>& lt) {
    src.resize(std::size_t(n));
    if (perm) std::copy(perm, perm + n, src.begin());
    else std::iota(src.begin(), src.end(), 0);
    lt.rows = lt.cols = n;
    lt.ptr.assign(ptr, ptr + n + 1);
    const std::size_t nnz = std::size_t(ptr[n]);
    lt.idx.assign(idx, idx + nnz);
    lt.val.resize(nnz);
    std::transform(val, val + nnz, lt.val.begin(), [](double v) { return T(v); });
    // Squared pivots in double: they are the pivots of the elimination, d_j = L_jj^2.
    double smallest = std::numeric_limits<double>::infinity(), largest = 0;
    for (index j = 0; j < n; ++j) {
      detail::require<not_positive_definite>(ptr[j] < ptr[j + 1] && idx[ptr[j]] == j,
                                             what + " (no pivot in column " + std::to_string(j) + ")");
      const double d = val[ptr[j]] * val[ptr[j]];
      detail::require<not_positive_definite>(std::isfinite(d) && d > 0, what + " (pivot " + std::to_string(j) +
                                                                             " is not positive)");
      smallest = std::min(smallest, d);
      largest = std::max(largest, d);
    }
    if (!(smallest > double(n) * std::numeric_limits<double>::epsilon() * largest)) {
      std::ostringstream msg;
      msg << what << " (singular or numerically not positive definite: pivots from " << smallest << " to "
          << largest << ")";
      throw not_positive_definite("h2expr: " + msg.str());
    }
  }

  std::shared_ptr<state> s_;
};

// The sparse Cholesky factorization of S (see sparse_cholesky).
template <class T, class Space>
sparse_cholesky<T, Space> cholesky(const sparse_matrix<T, Space>& S) {
  return sparse_cholesky<T, Space>(S);
}

}  // namespace h2expr
