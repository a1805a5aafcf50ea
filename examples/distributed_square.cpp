// An H2 kernel matrix split over the ranks of MPI_COMM_WORLD, each rank passing only its own points; its
// square by hara(A * A), checked with relative_error, compressed, and applied to the user's vectors.
//   mpirun -np 4 build/examples/distributed_square [grid side = 64] [tol = 1e-4]
// (as root, or with more ranks than cores: mpirun --allow-run-as-root --oversubscribe -np 4 ...)
// Exit status 1 when the error misses the tolerance (ctest runs it on 3 ranks as a smoke test).
#include <mpi.h>

#include <h2expr/distributed.hpp>
#include <h2expr/h2_matrix.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace hx = h2expr;
namespace hd = h2expr::distributed;

int run(int side, double tol) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // This rank's points: a band of the grid's rows (the user's split; the matrix makes its own).
  const int first = side * rank / ranks, last = side * (rank + 1) / ranks;
  std::vector<std::array<double, 2>> mine;
  for (int j = first; j < last; ++j)
    for (int i = 0; i < side; ++i) mine.push_back({i / double(side - 1), j / double(side - 1)});

  const hx::build_options bo{.leaf_size = 64, .eta = 0.9};
  const auto A = hd::h2_matrix<double>::from_local_points(MPI_COMM_WORLD, mine, hx::kernels::exponential{0.1}, bo);
  hx::hara_report report;
  auto P = hx::hara(A * A, tol, {.report = &report});  // collective: split like A
  const double error = hx::relative_error(P, A * A, 10);  // the same value on every rank
  const std::size_t before = P.memory_bytes();
  hx::compress(P, tol);

  // The user's vectors (rows of this rank's points) through the matrix's split and back.
  const auto plan = hd::redistribution::contiguous(P, hx::index(mine.size()));
  const auto X = hx::matrix<double>::random(hx::index(mine.size()), 2, 7 + rank);
  const hx::matrix<double> Y = plan.to_user(P * plan.to_matrix(X));

  unsigned long long bytes[2] = {before, P.memory_bytes()}, total[2];
  MPI_Reduce(bytes, total, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("hara(A * A) on %d ranks: n = %lld, %d samples, relative error %.2e (tol %.0e), %.2f s\n", ranks,
                (long long)P.rows(), report.samples, error, tol, report.seconds);
    std::printf("storage %.1f MB over the ranks, %.1f MB after compress; ranks by level:", total[0] / 1e6, total[1] / 1e6);
    for (int k : P.basis_ranks()) std::printf(" %d", k);
    std::printf("\nY = P X for %lld x 2 vectors on rank 0 (its own points' rows)\n", (long long)Y.rows());
  }
  return error < 2 * tol ? 0 : 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    status = run(argc > 1 ? std::atoi(argv[1]) : 64, argc > 2 ? std::atof(argv[2]) : 1e-4);
  } catch (const hx::error& e) {  // raised on every rank alike: no rank is left waiting
    std::fprintf(stderr, "error: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
