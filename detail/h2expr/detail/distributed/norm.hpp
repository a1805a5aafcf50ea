#pragma once
// ||A||_2 of a distributed H2 matrix: the single process's block Krylov (krylov_two_norm), each rank on
// its rows of the vectors. The inner products are summed over the ranks in rank order, so that every
// rank takes the same steps and returns the same value; the start vectors are the single process's on
// the host (entry i of a column is a function of the user's index i alone: random_entry), so that the
// estimate, and the thresholds compress derives from it, do not depend on the number of ranks.
#include <h2expr/detail/distributed/hgemv.hpp>
#include <h2expr/detail/h2/compress.hpp>
#include <h2expr/detail/operands/matrix.hpp>

#include <cstdint>
#include <vector>

namespace h2expr::detail {

// krylov_two_norm's vectors, split over the ranks by the rows of a distributed matrix.
struct distributed_vectors {
  const communicator& comm;
  const std::vector<index>& indices;  // the user's indices of this rank's rows
  index global;
  index total(index) const { return global; }
  template <class T, class Space>
  matrix<T, Space> random(const context_ptr<Space>& ctx, index rows, int cols, std::uint64_t seed) const {
    dense<T> X(rows, cols);
    for (int j = 0; j < cols; ++j)
      for (index i = 0; i < rows; ++i)
        X(i, j) = random_entry<T>(distribution::normal, seed, 0, std::uint64_t(j), std::int64_t(indices[std::size_t(i)]));
    return matrix<T, Space>(X, ctx);
  }
  template <class T, class Space>
  void sum(view<T, Space> c) const {
    dense<T> h = to_dense(c);
    comm.sum_in_rank_order(h.data(), int(h.size()));
    if (h.size()) upload_2d(*c.context(), std::size_t(c.rows()), std::size_t(c.cols()), h.data(), std::size_t(c.rows()),
                            c.data(), std::size_t(c.ld()));
  }
};

// Collective: ||A||_2 by block Krylov, as norm_estimate (h2/compress.hpp) in one process.
template <class T, class Space>
double distributed_norm_estimate(const distributed_data<T, Space>& A, int max_steps = 6) {
  const index rows = index(A.local_indices.size());
  const bool symmetric = A.symmetric;
  return krylov_two_norm<T, Space>(
      A.ctx, rows, rows,
      [&](op trans, const_view<T, Space> x, view<T, Space> y) { distributed_hgemv(A, trans, T(1), x, T(0), y); }, 12345,
      symmetric ? 2 * max_steps : max_steps, symmetric, 4, distributed_vectors{*A.comm, A.local_indices, A.structure.rows()});
}

}  // namespace h2expr::detail
