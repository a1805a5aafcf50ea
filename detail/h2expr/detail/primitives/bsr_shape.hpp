#pragma once
// Shapes of the blocks of a block-sparse-row product (bsr_gemm, both spaces). Uniform blocks need
// none of these arrays: block row t is mb high at row t mb of Y, block column s nb wide at row s nb
// of X, block b at b block_stride. Per-node ranks (compressed H2 levels) give them per node, in the
// space's memory: output node u is k_out[u] high at row at_out[u] of Y, input node v k_in[v] wide at
// row at_in[v] of X, block b starts at at_block[b], packed (its leading dimension is its stored
// height); mb then bounds every k_out.
#include <cstdint>

namespace h2expr::detail {

struct bsr_shape {
  const std::int64_t* k_out = nullptr;
  const std::int64_t* at_out = nullptr;
  const std::int64_t* k_in = nullptr;
  const std::int64_t* at_in = nullptr;
  const std::int64_t* at_block = nullptr;
  bool uniform() const { return k_out == nullptr; }
};

}  // namespace h2expr::detail
