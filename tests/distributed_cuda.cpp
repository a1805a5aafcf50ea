// The distributed H2 matrix on the CUDA space (issue 23), double: the same calls as on the host space,
// each against the host space's distributed result on the same ranks (products, compress, hara of a
// symmetric and of a general operator). Skipped where no device exists (then this program checks that
// the CUDA path compiles); messages go to MPI as device memory when it is CUDA-aware, else through
// page-locked host memory (H2EXPR_MPI_CUDA_AWARE=0 forces the staging).
#define H2EXPR_DISTRIBUTED_TEST_MAIN
#include "distributed_support.hpp"

#include <h2expr/h2_matrix.hpp>

#include <algorithm>
#include <cstdio>

#include "instances/h2_matrix.hpp"

namespace hd = h2expr::distributed;

namespace h2expr::test {
namespace {

struct distributed_cuda : ::testing::Test {
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device here";
  }
};

// A X and A^T X of the CUDA space's matrix against the host space's (both split over the ranks).
template <class Ah, class Ac>
double products_apart(const Ah& host_matrix, const Ac& cuda_matrix, const dense<double>& X) {
  const matrix<double, host> Xh(X);
  const matrix<double, cuda> Xc(X);
  const double y = global_error(to_dense(cuda_matrix * Xc), to_dense(host_matrix * Xh));
  const double z = global_error(to_dense(transpose(cuda_matrix) * Xc), to_dense(transpose(host_matrix) * Xh));
  return std::max(y, z);
}

TEST_F(distributed_cuda, products_compress_and_hara_match_the_host_space) {
  const std::uint64_t seed = shared_seed(81);
  const int n = 2000;
  const auto points = random_points<double, 2>(n, seed);
  const build_options bo{.leaf_size = 32};
  auto Ah = hd::h2_matrix<double, host>::from_kernel(MPI_COMM_WORLD, points, kernels::exponential{0.2}, bo);
  auto Ac = hd::h2_matrix<double, cuda>::from_kernel(MPI_COMM_WORLD, points, kernels::exponential{0.2}, bo);
  const auto Bh = hd::h2_matrix<double, host>::from_kernel(MPI_COMM_WORLD, points, skewed_kernel(0.3), bo);
  const auto Bc = hd::h2_matrix<double, cuda>::from_kernel(MPI_COMM_WORLD, points, skewed_kernel(0.3), bo);
  ASSERT_EQ(Ah.local_indices(), Ac.local_indices());
  const dense<double> X = random_block<double>(Ah.local_rows(), 3, seed + 1);
  EXPECT_LT(products_apart(Ah, Ac, X), 1e-13) << "A X";
  EXPECT_LT(products_apart(Bh, Bc, X), 1e-13) << "B X (non-symmetric)";

  // hara of a symmetric and of a general operator: the same samples and construction on both spaces (the
  // host suite's bounds: to rounding, magnified only where a rank lies at a threshold).
  const double eps = 1e-4;
  hara_report rh, rc;
  const auto Ph = hara(Ah * Ah, eps, {.seed = seed, .report = &rh});
  const auto Pc = hara(Ac * Ac, eps, {.seed = seed, .report = &rc});
  EXPECT_LT(relative_error(Pc, Ac * Ac, 10, seed + 2), 2 * eps);
  EXPECT_LT(products_apart(Ph, Pc, X), rh.samples == rc.samples ? 0.1 * eps : 2 * eps) << "hara(A A)";
  const int symmetric_samples = rc.samples;
  const auto Qh = hara(Ah * Bh, eps, {.seed = seed, .report = &rh});
  const auto Qc = hara(Ac * Bc, eps, {.seed = seed, .report = &rc});
  EXPECT_FALSE(Qc.symmetric());
  EXPECT_LT(relative_error(Qc, Ac * Bc, 10, seed + 3), 2 * eps);
  EXPECT_LT(products_apart(Qh, Qc, X), rh.samples == rc.samples ? 0.1 * eps : 2 * eps) << "hara(A B)";

  // compress (orthogonalize inside) of the kernel matrix: the host space's ranks and operator.
  const auto ch = compress(Ah, 1e-6), cc = compress(Ac, 1e-6);
  EXPECT_EQ(ch.node_rank_max, cc.node_rank_max);
  EXPECT_LT(products_apart(Ah, Ac, X), 1e-9) << "compressed";
  if (world_rank() == 0)
    std::printf("distributed on the CUDA space, %d ranks (MPI %s): hara(A A) %d samples, hara(A B) %d samples\n",
                world_size(), detail::mpi_cuda_aware() ? "CUDA-aware" : "staged through pinned host memory", symmetric_samples,
                rc.samples);
}

}  // namespace
}  // namespace h2expr::test
