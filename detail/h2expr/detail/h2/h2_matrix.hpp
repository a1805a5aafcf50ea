#pragma once
// h2_matrix<T, Space>: an H2 matrix (nested row and column bases, coupling matrices per level,
// dense leaves) on a shareable structure. Built from a kernel on a point cloud by Chebyshev
// interpolation; multiplied by blocks of vectors with HGEMV.
#include <h2expr/detail/structure/build_options.hpp>
#include <h2expr/detail/structure/chebyshev.hpp>
#include <h2expr/detail/h2/h2_data.hpp>
#include <h2expr/detail/h2/h2_file.hpp>
#include <h2expr/detail/h2/hgemv.hpp>
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

template <class T, class Space>
class h2_matrix;

namespace detail {
// The mutable representation of an h2_matrix, for h2expr's operations that change one in place
// (orthogonalize, compress, hara's builders, load): a user changes a matrix only through those.
struct h2_access {
  template <class T, class Space>
  static h2_data<T, Space>& data(h2_matrix<T, Space>& A) { return A.d_; }
};
}  // namespace detail

template <class T, class Space = host>
class h2_matrix {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "h2expr: T must be float or double");

 public:
  using value_type = T;
  using space = Space;

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
    double k_double = 1;
    for (int i = 0; i < D; ++i) k_double *= p;
    detail::require(k_double <= 4096, "cheb_points^D = " + std::to_string(k_double) + " is too large a rank");
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

    // Coupling matrices: kernel values between the interpolation points of the two clusters.
    auto& c = *d.ctx;
    for (int l = 0; l <= L; ++l) {
      const auto& lv = blocks.coupling[l];
      detail::block_points<T> bp;
      for (int t = 0; t + 1 < int(lv.row_ptr.size()); ++t)
        for (int b = lv.row_ptr[t]; b < lv.row_ptr[t + 1]; ++b) bp.row_node.push_back(t), bp.col_node.push_back(lv.col[b]);
      d.coupling.emplace_back(d.ctx, std::size_t(bp.blocks()) * k * k);
      if (bp.blocks() == 0) continue;
      bp.row_points = detail::chebyshev_level_points<T>(boxes, l);
      bp.col_points = bp.row_points;
      bp.row_count.assign(std::size_t(1) << l, k);
      bp.col_count = bp.row_count;
      bp.row_stride = bp.col_stride = k;
      detail::evaluate_blocks<T, D>(c, kernel, bp, d.coupling[l].data());
      detail::require<non_finite_value>(detail::all_finite(c, d.coupling[l].data(), d.coupling[l].size()),
                                        "the kernel returned NaN or infinity (coupling block, level " +
                                            std::to_string(l) + ")");
    }

    // Dense leaves: kernel values between the points of two leaves, padded to m_max x m_max.
    {
      const auto& dn = blocks.dense;
      const int first = detail::cluster_tree::level_begin(L), leaves = detail::cluster_tree::level_size(L);
      detail::block_points<T> bp;
      for (int t = 0; t < leaves; ++t)
        for (int b = dn.row_ptr[t]; b < dn.row_ptr[t + 1]; ++b) bp.row_node.push_back(t), bp.col_node.push_back(dn.col[b]);
      bp.row_points.assign(std::size_t(leaves) * d.m_max * D, T(0));
      bp.row_count.resize(leaves);
      const auto& pts = d.structure.tree_points();
      for (int t = 0; t < leaves; ++t) {
        const int b0 = tree.begin[first + t], size = tree.end[first + t] - b0;
        bp.row_count[t] = size;
        std::copy_n(pts.begin() + std::size_t(b0) * D, std::size_t(size) * D,
                    bp.row_points.begin() + std::size_t(t) * d.m_max * D);
      }
      bp.col_points = bp.row_points;
      bp.col_count = bp.row_count;
      bp.row_stride = bp.col_stride = d.m_max;
      d.dense = detail::buffer<T, Space>(d.ctx, std::size_t(bp.blocks()) * d.m_max * d.m_max);
      detail::evaluate_blocks<T, D>(c, kernel, bp, d.dense.data());
      detail::require<non_finite_value>(detail::all_finite(c, d.dense.data(), d.dense.size()),
                                        "the kernel returned NaN or infinity (dense block)");
    }
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

// The dense matrix, on the host; for small n (it multiplies the identity).
template <class T, class Space>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> to_dense(const h2_matrix<T, Space>& A) {
  detail::require(A.rows() * A.cols() <= (index(1) << 28),
                  "to_dense of an H2 matrix of " + std::to_string(A.rows()) + " rows: too large for a dense copy");
  const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> I =
      Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>::Identity(A.cols(), A.cols());
  return to_dense(detail::multiply(A, detail::op::none, matrix<T, Space>(I, A.data().ctx)));
}

}  // namespace h2expr
