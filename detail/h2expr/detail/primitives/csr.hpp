#pragma once
// CSR arrays on the host, shared by both spaces' sparse products and Cholesky factors (sparse
// matrices always arrive as host arrays): their checks, the canonical form (sorted, duplicates summed),
// transposition, exact comparison and a fingerprint; and the primary template of the factor each
// backend specializes.
#include <h2expr/detail/core/error.hpp>

#include <Eigen/SparseCore>
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr::detail {

// A CSR matrix in ordinary host memory, rows sorted by column, no duplicates.
template <class T>
struct host_csr {
  std::int64_t rows = 0, cols = 0;
  std::vector<int> ptr{0}, idx;
  std::vector<T> val;
  std::int64_t nnz() const { return std::int64_t(idx.size()); }
};

// Checks CSR arrays as a user gives them (what: the caller's name in the message): shape, row_ptr
// from 0 up to the entry count, column indices in range, finite values.
template <class T>
void check_csr_arrays(const std::string& what, std::int64_t rows, std::int64_t cols, const std::vector<int>& row_ptr,
                      const std::vector<int>& col_idx, const std::vector<T>& values) {
  const std::string shape = std::to_string(rows) + " x " + std::to_string(cols);
  require(rows >= 0 && cols >= 0, what + ": negative size " + shape);
  require(rows < INT_MAX && cols < INT_MAX, what + ": " + shape + " does not fit int indices");
  require<dimension_mismatch>(std::int64_t(row_ptr.size()) == rows + 1,
                              what + ": row_ptr has " + std::to_string(row_ptr.size()) + " entries, a matrix with " +
                                  std::to_string(rows) + " rows needs " + std::to_string(rows + 1));
  require<dimension_mismatch>(
      col_idx.size() == values.size(),
      what + ": col_idx has " + std::to_string(col_idx.size()) + " entries, values " + std::to_string(values.size()));
  require(col_idx.size() <= std::size_t(INT_MAX),
          what + ": " + std::to_string(col_idx.size()) + " entries do not fit int indices");
  require(row_ptr[0] == 0, what + ": row_ptr[0] is " + std::to_string(row_ptr[0]) + ", it must be 0");
  for (std::int64_t r = 0; r < rows; ++r)
    require(row_ptr[r + 1] >= row_ptr[r], what + ": row_ptr decreases at row " + std::to_string(r) + " (" +
                                              std::to_string(row_ptr[r]) + " to " + std::to_string(row_ptr[r + 1]) +
                                              ")");
  require<dimension_mismatch>(std::size_t(row_ptr[rows]) == col_idx.size(),
                              what + ": row_ptr ends at " + std::to_string(row_ptr[rows]) + ", but there are " +
                                  std::to_string(col_idx.size()) + " entries");
  for (std::int64_t r = 0; r < rows; ++r)
    for (int e = row_ptr[r]; e < row_ptr[r + 1]; ++e) {
      require(col_idx[e] >= 0 && col_idx[e] < cols, what + ": column index " + std::to_string(col_idx[e]) + " in row " +
                                                        std::to_string(r) + " is outside a " + shape + " matrix");
      require<non_finite_value>(std::isfinite(values[e]), what + ": entry (" + std::to_string(r) + ", " +
                                                              std::to_string(col_idx[e]) + ") is not finite");
    }
}

// The CSR arrays of an Eigen sparse matrix (either storage order; explicit zeros kept), checked to fit
// int indices (what: the caller's name in the message).
template <class T, int Options, class StorageIndex>
host_csr<T> csr_of_eigen(const Eigen::SparseMatrix<T, Options, StorageIndex>& S, const std::string& what) {
  require(S.rows() <= INT_MAX && S.cols() <= INT_MAX && S.nonZeros() <= INT_MAX,
          what + ": " + std::to_string(S.rows()) + " x " + std::to_string(S.cols()) + " with " +
              std::to_string(S.nonZeros()) + " entries does not fit int indices");
  Eigen::SparseMatrix<T, Eigen::RowMajor, int> R = S;
  R.makeCompressed();
  const auto nnz = std::size_t(R.nonZeros());
  host_csr<T> a;
  a.rows = R.rows();
  a.cols = R.cols();
  a.ptr.assign(R.outerIndexPtr(), R.outerIndexPtr() + R.rows() + 1);
  a.idx.assign(R.innerIndexPtr(), R.innerIndexPtr() + nnz);
  a.val.assign(R.valuePtr(), R.valuePtr() + nnz);
  return a;
}

// The canonical CSR of (row_ptr, col_idx, values), already checked for shape and range: columns
// sorted within each row and duplicate entries summed (the usual assembly convention).
template <class T>
host_csr<T> canonical_csr(std::int64_t rows, std::int64_t cols, const std::vector<int>& row_ptr,
                          const std::vector<int>& col_idx, const std::vector<T>& values) {
  host_csr<T> a;
  a.rows = rows;
  a.cols = cols;
  bool canonical = true;
  for (std::int64_t r = 0; r < rows && canonical; ++r)
    for (int e = row_ptr[r] + 1; e < row_ptr[r + 1]; ++e)
      if (col_idx[e] <= col_idx[e - 1]) {
        canonical = false;
        break;
      }
  if (canonical) {  // the common case: the arrays are kept as they are
    a.ptr = row_ptr;
    a.idx = col_idx;
    a.val = values;
    return a;
  }
  a.ptr.assign(std::size_t(rows) + 1, 0);
  a.idx.reserve(col_idx.size());
  a.val.reserve(values.size());
  std::vector<int> order;
  for (std::int64_t r = 0; r < rows; ++r) {
    order.resize(std::size_t(row_ptr[r + 1] - row_ptr[r]));
    std::iota(order.begin(), order.end(), row_ptr[r]);
    // Stable, so duplicates are summed in the order given: the result does not depend on the sort.
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return col_idx[x] < col_idx[y]; });
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int e = order[i];
      if (i > 0 && col_idx[e] == a.idx.back()) a.val.back() += values[e];
      else {
        a.idx.push_back(col_idx[e]);
        a.val.push_back(values[e]);
      }
    }
    a.ptr[r + 1] = int(a.idx.size());
  }
  return a;
}

// A^T as CSR (a counting sort by column, so its rows come out sorted).
template <class T>
host_csr<T> transposed(const host_csr<T>& a) {
  host_csr<T> t;
  t.rows = a.cols;
  t.cols = a.rows;
  t.ptr.assign(std::size_t(a.cols) + 1, 0);
  t.idx.resize(a.idx.size());
  t.val.resize(a.val.size());
  for (int c : a.idx) ++t.ptr[std::size_t(c) + 1];
  for (std::int64_t c = 0; c < a.cols; ++c) t.ptr[c + 1] += t.ptr[c];
  std::vector<int> next(t.ptr.begin(), t.ptr.end() - 1);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (int e = a.ptr[r]; e < a.ptr[r + 1]; ++e) {
      const int p = next[a.idx[e]]++;
      t.idx[p] = int(r);
      t.val[p] = a.val[e];
    }
  return t;
}

// Exact equality of canonical CSR arrays (values by ==, so 0 and -0 are equal).
template <class T>
bool same_csr(std::int64_t rows, std::int64_t cols, const int* aptr, const int* aidx, const T* aval,
              std::int64_t brows, std::int64_t bcols, const int* bptr, const int* bidx, const T* bval) {
  if (rows != brows || cols != bcols) return false;
  if (!std::equal(aptr, aptr + rows + 1, bptr)) return false;
  const std::int64_t nnz = aptr[rows];
  return std::equal(aidx, aidx + nnz, bidx) && std::equal(aval, aval + nnz, bval);
}
template <class T>
bool same_csr(const host_csr<T>& a, const host_csr<T>& b) {
  return same_csr(a.rows, a.cols, a.ptr.data(), a.idx.data(), a.val.data(), b.rows, b.cols, b.ptr.data(),
                  b.idx.data(), b.val.data());
}

// A hash of the canonical arrays, equal for equal matrices (-0 hashed as 0): comparing hashes first
// makes a negative is_transpose_of cheap on any space.
template <class T>
std::uint64_t fingerprint(const host_csr<T>& a) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](std::uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  };
  mix(std::uint64_t(a.rows));
  mix(std::uint64_t(a.cols));
  for (int p : a.ptr) mix(std::uint64_t(std::uint32_t(p)));
  for (int c : a.idx) mix(std::uint64_t(std::uint32_t(c)));
  for (T v : a.val) {
    const T x = v == T(0) ? T(0) : v;
    std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t> bits;
    std::memcpy(&bits, &x, sizeof(T));
    mix(std::uint64_t(bits));
  }
  return h;
}

// The factor of P S P^T = L L^T of a sparse Cholesky factorization, ready for solves in a space.
// Built from the host CSR of L^T (row j: the diagonal L_jj first, then L_ij for i > j, i.e. the
// columns of L) and src, with (P b)_j = b_src[j].
template <class T, class Space>
class cholesky_factor;

}  // namespace h2expr::detail
