#pragma once
// h2expr::distributed::h2_matrix<T, Space>: an H2 matrix split over the ranks of an MPI communicator
// by block rows below a C-level (partition in distribution.hpp), each rank holding its share in the layouts of
// h2_data, multiplied by distributed HGEMV (hgemv.hpp). Every call is collective.
#include <h2expr/detail/distributed/compress.hpp>
#include <h2expr/detail/distributed/hgemv.hpp>
#include <h2expr/detail/distributed/orthogonalize.hpp>
#include <h2expr/detail/h2/kernel_blocks.hpp>
#include <h2expr/detail/operands/matrix.hpp>
#include <h2expr/detail/structure/build_options.hpp>
#include <h2expr/detail/structure/chebyshev.hpp>
#include <h2expr/detail/structure/point_cloud.hpp>
#include <h2expr/detail/structure/structure.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace h2expr {
namespace distributed {

using product_report = detail::distributed_product_report;

template <class T, class Space = host>
class h2_matrix : public h2expr::detail::values_in_space<T, Space> {
 public:
  // Collective. The kernel matrix M(i, j) = kernel(points[i], points[j]), as h2expr::h2_matrix::from_kernel
  // builds it, split over the ranks of comm: every rank passes the same points and options (checked:
  // otherwise ranks_disagree on every rank) and computes only its own blocks. The structure (cluster
  // tree, matrix tree) is built on every rank.
  template <int D, class Kernel>
  static h2_matrix from_kernel(MPI_Comm comm, const point_cloud<T, D>& points, const Kernel& kernel,
                               const build_options& options = {}, context_ptr<Space> ctx = default_context<Space>()) {
    h2_matrix A;
    auto& d = A.d_;
    d.comm = std::make_shared<const detail::communicator>(comm);
    const auto failure = detail::rank_failure::of([&] {
      validate(options);
      detail::interpolation_rank(options.cheb_points, D);
    });
    d.comm->agree("distributed h2_matrix::from_kernel",
                  {{"the number of points", points.size()},
                   {"the value type", std::int64_t(sizeof(T))},
                   {"the dimension", D},
                   {"leaf_size", options.leaf_size},
                   {"eta", detail::bits_of(options.eta)},
                   {"cheb_points", options.cheb_points},
                   {"weak_admissibility", options.weak_admissibility},
                   {"the points (a hash of their coordinates)", hash(points)}},
                  failure);
    // The structure each rank built, compared too: the exchange plans rest on its being the same.
    std::int64_t built = 0;
    const auto failure_in_build = detail::rank_failure::of([&] {
      build(d, points, kernel, options, std::move(ctx));
      built = structure_hash(d.structure);
    });
    d.comm->agree("distributed h2_matrix::from_kernel", {{"the structure (a hash of its trees and blocks)", built}},
                  failure_in_build);
    return A;
  }

  // Collective. The same matrix, for points the ranks hold in parts: rank q passes its own (any number,
  // none included), and point i of rank q is the user's point offset_q + i, offset_q the points of the
  // ranks before q (the numbering redistribution::contiguous uses). The points are gathered on every
  // rank, as the structure is built on every rank; the blocks, the bulk of the memory, are each rank's own.
  template <std::size_t N, class Kernel>
  static h2_matrix from_local_points(MPI_Comm comm, const std::vector<std::array<T, N>>& local_points, const Kernel& kernel,
                                     const build_options& options = {}, context_ptr<Space> ctx = default_context<Space>()) {
    constexpr int D = int(N);
    const detail::communicator c(comm);
    std::vector<int> counts(static_cast<std::size_t>(c.size()));
    const int mine = int(std::min<std::size_t>(local_points.size(), std::size_t(INT32_MAX / D)));
    detail::mpi_check(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, c.get()), "MPI_Allgather");
    std::int64_t total = 0;
    for (int n : counts) total += n;
    detail::rank_failure bad;
    if (local_points.size() > std::size_t(INT32_MAX / D)) bad = {detail::rank_failure::invalid, "from_local_points: too many points on one rank"};
    else if (total == 0 || total * D > INT32_MAX) bad = {detail::rank_failure::invalid, "from_local_points: " + std::to_string(total) + " points in all"};
    c.agree("distributed h2_matrix::from_local_points", {}, bad);
    for (int& n : counts) n *= D;
    std::vector<std::array<T, D>> all(static_cast<std::size_t>(total));
    c.allgather(reinterpret_cast<const T*>(local_points.data()), counts, reinterpret_cast<T*>(all.data()));
    std::optional<point_cloud<T, D>> points;
    const auto failure = detail::rank_failure::of([&] { points.emplace(std::move(all)); });  // non-finite coordinates
    c.agree("distributed h2_matrix::from_local_points", {}, failure);
    return from_kernel(comm, *points, kernel, options, std::move(ctx));
  }
  template <int D, class Kernel>
  static h2_matrix from_local_points(MPI_Comm comm, const point_cloud<T, D>& local_points, const Kernel& kernel,
                                     const build_options& options = {}, context_ptr<Space> ctx = default_context<Space>()) {
    return from_local_points(comm, local_points.coords(), kernel, options, std::move(ctx));
  }

  h2_matrix() = default;

  index rows() const { return d_.structure.rows(); }  // global
  index cols() const { return d_.structure.cols(); }
  // The user's indices of this rank's rows (and columns), in the order of this rank's rows of X and Y.
  const std::vector<index>& local_indices() const { return d_.local_indices; }
  index local_rows() const { return index(d_.local_indices.size()); }
  int rank() const { return comm().rank(); }
  int ranks() const { return comm().size(); }
  // The level above which every rank holds (and computes) the whole tree.
  int c_level() const { return d_.dist.c; }
  // This rank's storage of bases, transfers, coupling and dense blocks (the top included), in bytes.
  std::size_t memory_bytes() const { return d_.row_basis ? d_.bytes() : 0; }
  bool symmetric() const { return d_.symmetric; }
  // Rank of the bases per level 0..depth.
  const std::vector<int>& basis_ranks() const { return d_.rank; }
  const ::h2expr::structure<T>& structure() const { return d_.structure; }
  // h2expr's duplicate of the communicator the matrix was built on.
  MPI_Comm communicator() const { return comm().get(); }
  ::h2expr::context<Space>& context() const { return *d_.ctx; }
  const detail::distributed_data<T, Space>& data() const { return d_; }

 private:
  friend struct detail::h2_access;
  const detail::communicator& comm() const {
    detail::require<missing_structure>(d_.comm != nullptr, "distributed h2_matrix: empty (default-constructed)");
    return *d_.comm;
  }
  template <int D>
  static std::int64_t hash(const point_cloud<T, D>& points) {  // FNV-1a over the coordinates' bytes
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < points.size(); ++i)
      for (int k = 0; k < D; ++k) {
        unsigned char bytes[sizeof(T)];
        std::memcpy(bytes, &points[i][k], sizeof(T));
        for (unsigned char b : bytes) h = (h ^ b) * 0x100000001b3ull;
      }
    return std::int64_t(h);
  }

  static std::int64_t structure_hash(const ::h2expr::structure<T>& st) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&](std::int64_t v) { h = (h ^ std::uint64_t(v)) * 0x100000001b3ull; };
    for (int p : st.row_tree().perm) mix(p);
    for (const auto& lv : st.blocks().coupling)
      for (int s : lv.col) mix(s);
    for (int s : st.blocks().dense.col) mix(s);
    return std::int64_t(h);
  }

  template <int D, class Kernel>
  static void build(detail::distributed_data<T, Space>& d, const point_cloud<T, D>& points, const Kernel& kernel,
                    const build_options& options, context_ptr<Space> ctx) {
    using detail::buffer;
    d.ctx = std::move(ctx);
    d.structure = ::h2expr::structure<T>::from_points(points, options);
    const auto& tree = d.structure.row_tree();
    const auto& blocks = d.structure.blocks();
    const auto& pts = d.structure.tree_points();
    const int L = tree.depth, k = detail::interpolation_rank(options.cheb_points, D);
    const auto boxes = detail::make_chebyshev_boxes(tree, options.cheb_points);
    d.m_max = std::max(tree.max_leaf_size, 1);
    d.rank.assign(L + 1, k);
    d.symmetric = detail::is_symmetric_kernel<Kernel>::value;
    d.dist = detail::partition(d.comm->size(), d.comm->rank(), L);
    const auto& dist = d.dist;
    const int c = dist.c, m = d.m_max, first_leaf = detail::cluster_tree::level_begin(L);

    // The bases: the own leaves and transfers, the transfers of the top on every rank (the
    // interpolation bases serve rows and columns alike).
    auto basis = std::make_shared<detail::basis_share<T, Space>>();
    {
      const auto leaves = detail::chebyshev_leaf_bases<T>(tree, boxes, pts, m);
      const std::size_t per = std::size_t(m) * k;
      basis->leaves = buffer<T, Space>(d.ctx, std::vector<T>(leaves.begin() + dist.begin(L) * per, leaves.begin() + dist.end(L) * per));
    }
    basis->transfers.resize(L + 1);
    for (int l = 1; l <= L; ++l) {
      auto all = detail::chebyshev_transfers<T>(boxes, l);
      if (l > c) {
        const std::size_t per = std::size_t(2) * k * k;
        all = std::vector<T>(all.begin() + dist.begin(l - 1) * per, all.begin() + dist.end(l - 1) * per);
      }
      basis->transfers[l] = buffer<T, Space>(d.ctx, all);
    }
    d.row_basis = d.col_basis = basis;

    // The top's coupling blocks, all of them on every rank.
    d.top_level = L;
    for (int l = 0; l <= L; ++l)
      if (blocks.coupling[l].blocks() > 0) {
        d.top_level = l;
        break;
      }
    for (int l = 0; l < c; ++l) {
      const auto& lv = blocks.coupling[l];
      std::vector<int> rows(lv.blocks());
      for (int t = 0; t < lv.level_size(); ++t) std::fill(rows.begin() + lv.row_ptr[t], rows.begin() + lv.row_ptr[t + 1], t);
      d.top_coupling.push_back(detail::kernel_coupling_blocks<T, D>(d.ctx, kernel, boxes, l, std::move(rows), lv.col));
      d.top_arrays.emplace_back(d.ctx, lv);
    }

    // The own block rows of levels c..L and of the dense leaves, split by where their columns live.
    std::vector<detail::split_level> splits;
    std::vector<const detail::block_sparse_level*> levels;
    for (int s = 0; s < dist.slots(); ++s) {
      const bool dense = s == dist.slots() - 1;
      const int l = dist.slot_level(s);
      const auto& lv = dense ? blocks.dense : blocks.coupling[l];
      auto sp = dist.split(lv, l);
      std::vector<int> rows, cols;
      for (const auto* list : {&sp.diag_global, &sp.off_global})
        for (int b : *list) rows.push_back(lv.row_of_block(b)), cols.push_back(lv.col[b]);
      d.blocks.push_back(dense ? detail::kernel_dense_blocks<T, D>(d.ctx, kernel, tree, pts, m, std::move(rows), std::move(cols))
                               : detail::kernel_coupling_blocks<T, D>(d.ctx, kernel, boxes, l, std::move(rows), std::move(cols)));
      d.splits.emplace_back(d.ctx, sp);
      d.unit.push_back(dense ? m : k);
      levels.push_back(&lv);
      splits.push_back(std::move(sp));
    }
    d.peers = dist.plans(levels, splits);
    d.split_host = std::move(splits);
    detail::build_peer_rows(d);

    // This rank's rows: the points of its leaves, in tree order.
    std::vector<int> padded(std::size_t(dist.count(L)) * m, -1);
    if (dist.count(L) > 0) {
      const int p0 = tree.begin[first_leaf + dist.begin(L)], p1 = tree.end[first_leaf + dist.end(L) - 1];
      d.local_indices.assign(tree.perm.begin() + p0, tree.perm.begin() + p1);
      for (int a = dist.begin(L); a < dist.end(L); ++a)
        for (int p = tree.begin[first_leaf + a]; p < tree.end[first_leaf + a]; ++p)
          padded[std::size_t(a - dist.begin(L)) * m + (p - tree.begin[first_leaf + a])] = p - p0;
    }
    d.padded_to_local = buffer<int, Space>(d.ctx, padded);
  }

  detail::distributed_data<T, Space> d_;
};

// Collective: Y = op(A) X (A^T when transpose), X and Y this rank's rows in the order of
// A.local_indices(); report (optional) adds what the product cost this rank.
template <class T, class Space>
matrix<T, Space> multiply(const h2_matrix<T, Space>& A, const matrix<T, Space>& X, bool transpose = false,
                          product_report* report = nullptr) {
  matrix<T, Space> Y;  // on A's context, as the product runs; a failure to allocate it is checked with the rest
  const auto allocated = detail::rank_failure::of([&] {
    detail::require<missing_structure>(A.data().ctx != nullptr, "distributed H2 product: the matrix is empty (default-constructed)");
    Y = matrix<T, Space>::uninitialized(A.local_rows(), X.cols(), A.data().ctx);
  });
  detail::distributed_hgemv(A.data(), transpose ? detail::op::transpose : detail::op::none, T(1), X.view(), T(0),
                            Y.view(), report, allocated);
  return Y;
}

template <class T, class Space>
matrix<T, Space> operator*(const h2_matrix<T, Space>& A, const matrix<T, Space>& X) {
  return multiply(A, X);
}

}  // namespace distributed

// Collective: A's bases made orthonormal, the operator unchanged (to rounding); every node's basis is
// the one h2expr::orthogonalize gives the same matrix in one process.
template <class T, class Space>
void orthogonalize(distributed::h2_matrix<T, Space>& A) {
  detail::distributed_orthogonalize(detail::h2_access::data(A));
}

// Collective: compress(A, tol) of one process (operations/compress.hpp) on the ranks: the same
// threshold (tol times the same norm estimate), the same weights node for node, so the same ranks.
// Ranks stay uniform per level (the largest node's: zero columns below it), where one process stores
// each node at its own; the report's memory is this rank's, its ranks and norms global (every rank
// gets the same report but for the memory and the seconds).
template <class T, class Space>
compress_report compress(distributed::h2_matrix<T, Space>& A, double tol, const compress_options& options = {}) {
  return detail::distributed_compress(detail::h2_access::data(A), tol, options);
}

namespace distributed {
// Collective: an estimate of ||A||_2 (to about 0.3%; the same value on every rank and for any number
// of ranks), by the block Krylov compress uses.
template <class T, class Space>
double norm_estimate(const h2_matrix<T, Space>& A) {
  detail::require<missing_structure>(A.data().comm != nullptr, "distributed norm_estimate: the matrix is empty (default-constructed)");
  return detail::distributed_norm_estimate(A.data());
}
}  // namespace distributed

}  // namespace h2expr
