#pragma once
// The supernodal sparse Cholesky of SuiteSparse's CHOLMOD (BLAS-3 on dense supernodes), used by
// cholesky(S) when the build found CHOLMOD (H2EXPR_HAS_CHOLMOD). The factor is handed back as a
// simplicial L (packed columns, diagonal first), the form the solves of both spaces read.
#include <h2expr/detail/core/error.hpp>

#include <Eigen/SparseCore>
#include <cholmod.h>
#include <climits>
#include <string>

namespace h2expr::detail {

class cholmod_llt {
 public:
  // P A P^T = L L^T from the lower triangle of A (compressed, column-major, double). Throws
  // not_positive_definite when a pivot is not positive; what names the matrix in messages.
  cholmod_llt(const Eigen::SparseMatrix<double, Eigen::ColMajor, int>& A, const std::string& what) {
    require(A.isCompressed() && A.rows() == A.cols() && A.rows() <= INT_MAX, "cholesky: internal: bad CHOLMOD input");
    cholmod_start(&c_);
    try {
      factor(A, what);
    } catch (...) {  // a constructor that throws runs no destructor: free what CHOLMOD holds here
      release();
      throw;
    }
  }
  ~cholmod_llt() { release(); }
  cholmod_llt(const cholmod_llt&) = delete;
  cholmod_llt& operator=(const cholmod_llt&) = delete;

  // perm[k]: the row of A that is row k of P A P^T.
  const int* perm() const { return static_cast<const int*>(L_->Perm); }
  // L's columns: col_ptr (n + 1 entries), row indices (diagonal first) and values.
  const int* col_ptr() const { return static_cast<const int*>(L_->p); }
  const int* row_idx() const { return static_cast<const int*>(L_->i); }
  const double* values() const { return static_cast<const double*>(L_->x); }

 private:
  void factor(const Eigen::SparseMatrix<double, Eigen::ColMajor, int>& A, const std::string& what) {
    c_.print = 0;  // errors become exceptions below, not lines on stdout
    c_.error_handler = nullptr;
    c_.supernodal = CHOLMOD_SUPERNODAL;
    c_.final_asis = 0;  // then: simplicial, LL^T, packed, monotonic
    c_.final_super = 0;
    c_.final_ll = 1;
    c_.final_pack = 1;
    c_.final_monotonic = 1;
    cholmod_sparse a{};
    a.nrow = a.ncol = std::size_t(A.rows());
    a.nzmax = std::size_t(A.nonZeros());
    a.p = const_cast<int*>(A.outerIndexPtr());
    a.i = const_cast<int*>(A.innerIndexPtr());
    a.x = const_cast<double*>(A.valuePtr());
    a.stype = -1;  // symmetric, lower triangle used
    a.itype = CHOLMOD_INT;
    a.xtype = CHOLMOD_REAL;
    a.dtype = CHOLMOD_DOUBLE;
    a.sorted = 0;
    a.packed = 1;
    L_ = cholmod_analyze(&a, &c_);
    check("analysis", what);
    cholmod_factorize(&a, L_, &c_);
    check("factorization", what);
    require<not_positive_definite>(L_->minor >= L_->n, what + " (a pivot is not positive)");
    require(L_->is_ll && !L_->is_super && L_->is_monotonic && L_->itype == CHOLMOD_INT,
            "cholesky: internal: CHOLMOD returned an unexpected factor form");
  }
  void release() noexcept {
    if (L_) cholmod_free_factor(&L_, &c_);
    cholmod_finish(&c_);
  }
  void check(const char* step, const std::string& what) {
    if (c_.status == CHOLMOD_NOT_POSDEF) throw not_positive_definite("h2expr: " + what + " (a pivot is not positive)");
    if (c_.status == CHOLMOD_TOO_LARGE)
      throw invalid_argument(std::string("h2expr: cholesky: CHOLMOD's ") + step +
                             ": the factor has more entries than 32-bit indices can count");
    if (c_.status == CHOLMOD_OUT_OF_MEMORY)
      throw device_out_of_memory(std::string("h2expr: cholesky: out of host memory in CHOLMOD's ") + step);
    if (c_.status < 0 || !L_)
      throw error(std::string("h2expr: cholesky: CHOLMOD's ") + step + " failed (status " + std::to_string(c_.status) + ")");
  }

  cholmod_common c_{};
  cholmod_factor* L_ = nullptr;
};

}  // namespace h2expr::detail
