// Batched ARA on the CUDA space (the paper's Figures 3-4), beside the batched SVD of the same batch.
#include "ara.hpp"

int main(int argc, char** argv) {
  if (!h2expr::cuda_available()) {
    std::printf("no CUDA device here: nothing to measure\n");
    return 0;
  }
  const double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
  auto ctx = h2expr::default_context<h2expr::cuda>();
  const auto& p = ctx->properties();
  std::printf("# h2expr batched ARA, CUDA space: %s, %d SMs, compute capability %d.%d\n", p.name,
              p.multiProcessorCount, p.major, p.minor);
  std::printf("# ceiling: the same space's batched gemm at ARA's sizes (the paper's 'practical peak')\n");
  h2expr::bench::run_ara_benchmarks<double>(ctx, scale);
  h2expr::bench::run_ara_benchmarks<float>(ctx, scale);
  std::printf("\nPaper (P100, 1,000 x 128 x 128): ARA up to 450 GFLOP/s double / 600 float against 1.5 / 3 TFLOP/s\n"
              "batched gemm, up to 240x faster than batched SVD. TARGETS.md has no batched-ARA row.\n");
}
