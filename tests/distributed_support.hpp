#pragma once
// What the distributed suites share (tests/distributed.cpp, distributed_cuda.cpp): the ranks, a seed
// and problems every rank builds alike, errors over all ranks' rows, broadcasts from rank 0, and main()
// (H2EXPR_DISTRIBUTED_TEST_MAIN in one translation unit per program).
#include <mpi.h>

#include <h2expr/distributed.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "support.hpp"

namespace h2expr::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// test_seed() (support.hpp) on rank 0, the same on every rank.
inline std::uint64_t shared_seed(std::uint64_t salt) {
  std::uint64_t s = test_seed();
  MPI_Bcast(&s, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return s ^ (salt * 0x9e3779b97f4a7c15ull);
}

template <class T, int D>
point_cloud<T, D> random_points(int n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::array<T, D>> p(static_cast<std::size_t>(n));
  for (auto& x : p)
    for (int k = 0; k < D; ++k) x[k] = T(u(g));
  return point_cloud<T, D>(std::move(p));
}

template <class T>
dense<T> random_block(index rows, int cols, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> nd;
  dense<T> X(rows, cols);
  for (index i = 0; i < X.size(); ++i) X.data()[i] = T(nd(g));
  return X;
}

template <class T>
dense<T> rows_of(const dense<T>& G, const std::vector<index>& idx) {
  dense<T> out(index(idx.size()), G.cols());
  for (std::size_t i = 0; i < idx.size(); ++i) out.row(index(i)) = G.row(idx[i]);
  return out;
}

// ||local - expected|| / ||expected|| over all ranks' rows: the same value on every rank.
template <class T>
double global_error(const dense<T>& local, const dense<T>& expected) {
  double mine[2] = {(local.template cast<double>() - expected.template cast<double>()).squaredNorm(),
                    expected.template cast<double>().squaredNorm()};
  double all[2];
  MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all[1] > 0 ? std::sqrt(all[0] / all[1]) : std::sqrt(all[0]);
}

// Broadcasts from rank 0 (one process's references are computed there alone: every rank computing them
// made the oversubscribed runs 2-4x slower).
template <class T>
void broadcast(dense<T>& M) {
  long dims[2] = {long(M.rows()), long(M.cols())};
  MPI_Bcast(dims, 2, MPI_LONG, 0, MPI_COMM_WORLD);
  M.resize(dims[0], dims[1]);
  MPI_Bcast(M.data(), int(M.size()), detail::mpi_type<T>(), 0, MPI_COMM_WORLD);
}
template <class V>
void broadcast(std::vector<V>& v) {
  long size = long(v.size());
  MPI_Bcast(&size, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  v.resize(std::size_t(size));
  MPI_Bcast(v.data(), int(size * sizeof(V)), MPI_BYTE, 0, MPI_COMM_WORLD);
}

}  // namespace h2expr::test

#if defined(H2EXPR_DISTRIBUTED_TEST_MAIN)
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (h2expr::test::world_rank() != 0) ::testing::GTEST_FLAG(brief) = true;  // other ranks print their failures only
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS(), worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
#endif
