// Batched ARA on the host space (the paper's Figures 3-4), beside Eigen's SVD of the same batch.
#include <thread>

#include "ara.hpp"

int main(int argc, char** argv) {
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;  // fraction of the batch of 1,000
  auto ctx = h2expr::default_context<h2expr::host>();
  std::printf("# h2expr batched ARA, host space: %d OpenMP threads, %u hardware threads\n",
              h2expr::context<h2expr::host>::threads(), std::thread::hardware_concurrency());
  std::printf("# ceiling: the same space's batched gemm at ARA's sizes (the paper's 'practical peak')\n");
  h2expr::bench::run_ara_benchmarks<double>(ctx, scale);
  h2expr::bench::run_ara_benchmarks<float>(ctx, scale);
  std::printf("\nPaper (P100, 1,000 x 128 x 128): ARA up to 450 GFLOP/s double / 600 float against 1.5 / 3 TFLOP/s\n"
              "batched gemm, up to 240x faster than batched SVD. TARGETS.md has no batched-ARA row.\n");
}
