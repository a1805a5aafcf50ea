#pragma once
// h2_matrix<T, Space>: an H2 matrix (nested row and column bases, coupling matrices per level,
// dense leaves) on a shareable structure. Built from a kernel on a point cloud by Chebyshev
// interpolation; multiplied by blocks of vectors with HGEMV.
#include <h2expr/detail/structure/build_options.hpp>
#include <h2expr/detail/structure/chebyshev.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/h2/h2_file.hpp>
#include <h2expr/detail/h2/hgemv.hpp>
#include <h2expr/detail/h2/kernel_blocks.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/primitives/kernels.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/structure/point_cloud.hpp>
#include <h2expr/detail/structure/structure.hpp>

#include <array>
#include <memory>
#include <string>
#include <utility>

namespace h2expr {

template <class T, class Space = host>
class h2_matrix : public detail::values_in_space<T, Space> {
 public:
  // The kernel matrix M(i, j) = kernel(points[i], points[j]), rows and columns in the cloud's order.
  // Entries of coupling and dense blocks are generated on the matrix's space: on the GPU for the
  // built-in kernels (kernels.hpp); any other callable is evaluated on the host and copied over.
  // Coupling matrices are not symmetric for a non-symmetric kernel; the interpolation bases serve
  // rows and columns alike (they are stored once and shared until an operation makes them differ).
  template <int D, class Kernel>
  static h2_matrix from_kernel(const point_cloud<T, D>& points, const Kernel& kernel, const build_options& options = {},
                               context_ptr<Space> ctx = default_context<Space>()) {
    validate(options);
    h2_matrix A;
    auto& d = A.d_;
    d.ctx = std::move(ctx);
    d.structure = ::h2expr::structure<T>::from_points(points, options);
    const auto& tree = d.structure.row_tree();
    const auto& blocks = d.structure.blocks();
    const int L = tree.depth, p = options.cheb_points;
    detail::interpolation_rank(p, D);
    const auto boxes = detail::make_chebyshev_boxes(tree, p);
    const int k = boxes.k;
    d.m_max = std::max(tree.max_leaf_size, 1);
    d.rank.assign(L + 1, k);
    d.arrays = std::make_shared<const detail::space_structure<Space>>(d.ctx, tree, blocks, d.m_max);

    auto basis = std::make_shared<detail::basis_tree<T, Space>>();
    basis->leaves = detail::buffer<T, Space>(
        d.ctx, detail::chebyshev_leaf_bases<T>(tree, boxes, d.structure.tree_points(), d.m_max));
    basis->transfers.resize(L + 1);
    for (int l = 1; l <= L; ++l)
      basis->transfers[l] = detail::buffer<T, Space>(d.ctx, detail::chebyshev_transfers<T>(boxes, l));
    d.row_basis = d.col_basis = basis;
    d.symmetric = detail::is_symmetric_kernel<Kernel>::value;

    // Coupling matrices: kernel values between the interpolation points of the two clusters; dense
    // leaves: between the points of two leaves, padded to m_max x m_max.
    for (int l = 0; l <= L; ++l) {
      const auto& lv = blocks.coupling[l];
      std::vector<int> rows(lv.blocks());
      for (int t = 0; t < lv.level_size(); ++t) std::fill(rows.begin() + lv.row_ptr[t], rows.begin() + lv.row_ptr[t + 1], t);
      d.coupling.push_back(detail::kernel_coupling_blocks<T, D>(d.ctx, kernel, boxes, l, std::move(rows), lv.col));
    }
    const auto& dn = blocks.dense;
    std::vector<int> rows(dn.blocks());
    for (int t = 0; t < dn.level_size(); ++t) std::fill(rows.begin() + dn.row_ptr[t], rows.begin() + dn.row_ptr[t + 1], t);
    d.dense = detail::kernel_dense_blocks<T, D>(d.ctx, kernel, tree, d.structure.tree_points(), d.m_max, std::move(rows), dn.col);
    return A;
  }

  // A matrix written by save(A, path), on this matrix's space (staged through the host): the same
  // structure, bases, blocks, per-node ranks and symmetry, so the same products (bit for bit on the
  // host) and the same memory_bytes(). file_error for a missing, truncated, corrupted or newer-version
  // file, or one saved with the other value type (the message names the file and what is wrong).
  static h2_matrix load(const std::string& path, context_ptr<Space> ctx = default_context<Space>()) {
    h2_matrix A;
    A.d_ = detail::load_h2<T, Space>(path, std::move(ctx));
    return A;
  }

  h2_matrix() = default;
  h2_matrix(const h2_matrix& o) : d_(o.d_.clone()) {}
  h2_matrix& operator=(const h2_matrix& o) {
    if (this != &o) d_ = o.d_.clone();
    return *this;
  }
  h2_matrix(h2_matrix&&) noexcept = default;
  h2_matrix& operator=(h2_matrix&&) noexcept = default;

  index rows() const { return d_.structure.rows(); }
  index cols() const { return d_.structure.cols(); }
  const ::h2expr::structure<T>& structure() const { return d_.structure; }
  // Storage of bases, transfer, coupling and dense blocks (padding included), in bytes.
  std::size_t memory_bytes() const { return d_.bytes(); }
  // Whether the matrix is known to be symmetric (built from a symmetric kernel, or by hara from a
  // symmetric operator); hara then samples it as such.
  bool symmetric() const { return d_.symmetric; }
  // Rank of the bases per level 0..depth.
  const std::vector<int>& ranks() const { return d_.rank; }
  ::h2expr::context<Space>& context() const { return *d_.ctx; }

  // The representation, read-only (h2expr's own algorithms change it through detail::h2_access).
  const detail::h2_data<T, Space>& data() const { return d_; }

 private:
  friend struct detail::h2_access;
  detail::h2_data<T, Space> d_;
};

namespace detail {
template <class T, class Space>
matrix<T, Space> multiply(const h2_matrix<T, Space>& A, op trans, const matrix<T, Space>& X) {
  const index inner = trans == op::none ? A.cols() : A.rows(), outer = trans == op::none ? A.rows() : A.cols();
  require<dimension_mismatch>(X.rows() == inner, "H2 product: the matrix has " + std::to_string(inner) +
                                                     " columns, the vectors " + std::to_string(X.rows()) + " rows");
  auto Y = matrix<T, Space>::uninitialized(outer, X.cols(), A.data().ctx);
  hgemv(A.data(), trans, X.view(), Y.view());
  return Y;
}
}  // namespace detail

// Writes A to path (format: detail/h2/h2_file.hpp) through a temporary file in the same folder, renamed
// over path once complete: a crash leaves the old file or the new one, never half of one. file_error
// when the folder cannot be written. Read back with h2_matrix<T, Space>::load(path).
template <class T, class Space>
void save(const h2_matrix<T, Space>& A, const std::string& path) {
  detail::require<missing_structure>(!A.data().structure.empty(), "save: the matrix is empty (default-constructed)");
  detail::save_h2(A.data(), path);
}

// A * X, transpose(A) * X and every other product with vectors: see expression.hpp.

// The dense matrix, on the host; for small n (it multiplies the identity's columns, a block at a time).
template <class T, class Space>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> to_dense(const h2_matrix<T, Space>& A) {
  return detail::dense_by_columns<T>(A.rows(), A.cols(), A.data().ctx, [&](const matrix<T, Space>& unit) {
    return detail::multiply(A, detail::op::none, unit);
  });
}

}  // namespace h2expr
