#pragma once
// h2expr::distributed::redistribution: moves blocks of vectors between the user's split of the rows
// over the ranks (each rank some of the global indices, in its own order) and a distributed matrix's
// (local_indices(), the matrix's tree order). Built once per split (one all-to-all of the indices),
// then one all-to-all of the values per call; every call is collective.
//
//   auto A = hd::h2_matrix<double>::from_local_points(MPI_COMM_WORLD, my_points, kernel);
//   auto plan = hd::redistribution::contiguous(A, my_points.size());  // from_local_points' numbering
//   hx::matrix<double> Y = plan.to_user(A * plan.to_matrix(X));      // X, Y: rows of my_points
#include <h2expr/detail/distributed/h2_matrix.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace h2expr::distributed {

class redistribution {
 public:
  // Collective: user_rows, the global indices of the rows this rank holds (in the order of its rows);
  // over the ranks every index of A's rows exactly once (else invalid_argument on every rank).
  template <class T, class Space>
  redistribution(const h2_matrix<T, Space>& A, std::vector<index> user_rows) : user_rows_(std::move(user_rows)) {
    const auto& d = A.data();
    detail::require<missing_structure>(d.comm != nullptr, "redistribution: the matrix is empty (default-constructed)");
    comm_ = d.comm;
    const auto& c = *comm_;
    const int P = c.size();
    matrix_rows_ = A.local_rows();
    // Where every global index lives in A: its tree position, and the ranks' ranges of positions.
    const auto& tree = d.structure.row_tree();
    const index n = A.rows();
    const int L = d.depth(), first_leaf = detail::cluster_tree::level_begin(L);
    std::vector<index> start(static_cast<std::size_t>(P) + 1, n);
    for (int q = 0; q < P; ++q)
      if (d.dist.begin(L, q) < (1 << L)) start[q] = tree.begin[first_leaf + d.dist.begin(L, q)];
    for (int q = P - 1; q >= 0; --q) start[q] = std::min(start[q], start[q + 1]);  // ranks without leaves
    detail::rank_failure bad;
    std::vector<index> position;  // of each user row in A's order
    std::vector<int> owner;
    if (user_rows_.size() > std::size_t(INT32_MAX)) bad = {detail::rank_failure::invalid, "redistribution: more than 2^31 - 1 rows on a rank"};
    if (!bad) {
      std::vector<index> inverse(static_cast<std::size_t>(n));
      for (index p = 0; p < n; ++p) inverse[std::size_t(tree.perm[std::size_t(p)])] = p;
      for (const index i : user_rows_) {
        if (i < 0 || i >= n) {
          bad = {detail::rank_failure::invalid,
                 "redistribution: row index " + std::to_string(i) + " outside 0 .. " + std::to_string(n - 1)};
          break;
        }
        const index p = inverse[std::size_t(i)];
        const int q = int(std::upper_bound(start.begin(), start.end(), p) - start.begin()) - 1;
        owner.push_back(q), position.push_back(p - start[q]);
      }
    }
    c.agree("distributed redistribution", {{"the rows of the matrix", n}}, bad);
    // Grouped by destination, in the user's order within each group.
    send_counts_.assign(static_cast<std::size_t>(P), 0);
    for (int q : owner) ++send_counts_[q];
    send_displs_ = displacements(send_counts_);
    send_rows_.resize(user_rows_.size());
    std::vector<index> send_positions(user_rows_.size());
    {
      std::vector<int> at(send_displs_.begin(), send_displs_.end() - 1);
      for (std::size_t r = 0; r < owner.size(); ++r) {
        const int slot = at[owner[r]]++;
        send_rows_[slot] = index(r), send_positions[slot] = position[r];
      }
    }
    recv_counts_.assign(static_cast<std::size_t>(P), 0);
    detail::mpi_check(MPI_Alltoall(send_counts_.data(), 1, MPI_INT, recv_counts_.data(), 1, MPI_INT, c.get()), "MPI_Alltoall");
    recv_displs_ = displacements(recv_counts_);
    recv_positions_.resize(std::size_t(recv_displs_.back()));
    detail::mpi_check(MPI_Alltoallv(send_positions.data(), send_counts_.data(), send_displs_.data(), MPI_INT64_T,
                                    recv_positions_.data(), recv_counts_.data(), recv_displs_.data(), MPI_INT64_T, c.get()),
                      "MPI_Alltoallv");
    // Every row of A's share exactly once.
    std::vector<char> seen(static_cast<std::size_t>(matrix_rows_), 0);
    bad = {};
    for (const index p : recv_positions_)
      if (p < 0 || p >= matrix_rows_ || seen[std::size_t(p)]++) {
        bad = {detail::rank_failure::invalid, "redistribution: a row index is held by more than one rank, or twice"};
        break;
      }
    if (!bad && index(recv_positions_.size()) != matrix_rows_)
      bad = {detail::rank_failure::invalid, "redistribution: the ranks' rows do not cover every index of the matrix"};
    c.agree("distributed redistribution", {}, bad);
  }

  // Collective: the split from_local_points numbers: rank q's local_count rows are the global indices
  // offset_q .. offset_q + local_count - 1, offset_q the rows of the ranks before it.
  template <class T, class Space>
  static redistribution contiguous(const h2_matrix<T, Space>& A, index local_count) {
    const auto& c = *A.data().comm;
    std::int64_t mine = local_count, offset = 0;
    detail::mpi_check(MPI_Exscan(&mine, &offset, 1, MPI_INT64_T, MPI_SUM, c.get()), "MPI_Exscan");
    if (c.rank() == 0) offset = 0;  // MPI_Exscan leaves rank 0's undefined
    std::vector<index> rows(static_cast<std::size_t>(std::max<index>(local_count, 0)));
    for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = offset + index(i);
    return redistribution(A, std::move(rows));
  }

  const std::vector<index>& user_rows() const { return user_rows_; }

  // Collective: X (this rank's user rows) as this rank's rows of the matrix, in local_indices()'s order.
  template <class T, class Space>
  matrix<T, Space> to_matrix(const matrix<T, Space>& X) const {
    return move(X, index(user_rows_.size()), matrix_rows_, send_rows_, send_counts_, send_displs_, recv_positions_, recv_counts_,
                recv_displs_, "to_matrix");
  }
  // Collective: Y (this rank's rows of the matrix) as this rank's user rows.
  template <class T, class Space>
  matrix<T, Space> to_user(const matrix<T, Space>& Y) const {
    return move(Y, matrix_rows_, index(user_rows_.size()), recv_positions_, recv_counts_, recv_displs_, send_rows_, send_counts_,
                send_displs_, "to_user");
  }

 private:
  static std::vector<int> displacements(const std::vector<int>& counts) {
    std::vector<int> d(counts.size() + 1, 0);
    for (std::size_t q = 0; q < counts.size(); ++q) d[q + 1] = d[q] + counts[q];
    return d;
  }

  // Rows `from` of X (grouped by destination: counts, displs) to the rows `to` of the result.
  template <class T, class Space>
  matrix<T, Space> move(const matrix<T, Space>& X, index rows_in, index rows_out, const std::vector<index>& from,
                        const std::vector<int>& from_counts, const std::vector<int>& from_displs, const std::vector<index>& to,
                        const std::vector<int>& to_counts, const std::vector<int>& to_displs, const char* what) const {
    const auto& c = *comm_;
    detail::rank_failure bad;
    if (X.rows() != rows_in)
      bad = {detail::rank_failure::dimensions, std::string("redistribution::") + what + ": " + std::to_string(X.rows()) +
                                                   " rows on this rank, expected " + std::to_string(rows_in)};
    else if (std::int64_t(std::max(from_displs.back(), to_displs.back())) * X.cols() > INT32_MAX)
      bad = {detail::rank_failure::invalid, std::string("redistribution::") + what + ": more than 2^31 - 1 values on a rank"};
    c.agree("distributed redistribution", {{"the number of vectors", std::int64_t(X.cols())}}, bad);
    const int w = int(X.cols());
    const auto Xh = to_dense(X);  // MPI reads host memory (staged on the CUDA space)
    std::vector<T> send(std::size_t(from_displs.back()) * w), receive(std::size_t(to_displs.back()) * w);
    for (std::size_t r = 0; r < from.size(); ++r)
      for (int j = 0; j < w; ++j) send[r * w + j] = Xh(from[r], j);
    auto scaled = [w](std::vector<int> v) {
      for (int& x : v) x *= w;
      return v;
    };
    const auto sc = scaled(from_counts), sd = scaled(from_displs), rc = scaled(to_counts), rd = scaled(to_displs);
    detail::mpi_check(MPI_Alltoallv(send.data(), sc.data(), sd.data(), detail::mpi_type<T>(), receive.data(), rc.data(), rd.data(),
                                    detail::mpi_type<T>(), c.get()),
                      "MPI_Alltoallv");
    detail::dense<T> out(rows_out, w);
    for (std::size_t r = 0; r < to.size(); ++r)
      for (int j = 0; j < w; ++j) out(to[r], j) = receive[r * w + j];
    return matrix<T, Space>(out, X.context_ptr());
  }

  std::shared_ptr<const detail::communicator> comm_;
  index matrix_rows_ = 0;
  std::vector<index> user_rows_, send_rows_, recv_positions_;
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
};

}  // namespace h2expr::distributed
