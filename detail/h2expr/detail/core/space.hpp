#pragma once
// Execution spaces. A space says where data lives and which backend runs the batched primitives.
// Everything above the primitives is written once, templated on the space.
#include <cstddef>
#include <memory>
#include <type_traits>

namespace h2expr {

// CPU: Eigen per batch item, OpenMP over the batch. Available everywhere.
struct host {};
// GPU: cuBLAS, cuSOLVER, cuRAND, Thrust and h2expr's own kernels. Usable in CUDA translation units
// (compiled by nvcc, linked to h2expr::cuda; or see H2EXPR_CUDA_SPACE); the host space still runs on a machine with no GPU.
struct cuda {};

// H2EXPR_CUDA_SPACE: this translation unit can use the CUDA space. A CUDA translation unit can; so can a
// C++ one that defines H2EXPR_CUDA_PRIMITIVES_EXTERN and links the CUDA primitives compiled by nvcc in
// another (see detail/primitives/cuda/primitives.hpp).
#if defined(__CUDACC__) || defined(H2EXPR_CUDA_PRIMITIVES_EXTERN)
#define H2EXPR_CUDA_SPACE 1
#endif

template <class Space>
inline constexpr bool is_space_v = std::is_same_v<Space, host> || std::is_same_v<Space, cuda>;

namespace detail {
// What the algorithms, written once for every space, may assume of a space's memory, where their plans
// differ by space (what a backend's primitives cost or need stays with the backend).
template <class Space>
struct space_traits;
template <>
struct space_traits<host> {
  // The CPU reads and writes the space's memory itself: nothing to stage, upload or download.
  static constexpr bool host_memory = true;
  // Pages are committed when first written, so room reserved and never written costs no memory.
  static constexpr bool commits_on_write = true;
  // Intermediates are formed in pieces of the size the caller measured best here (what the caches or
  // the memory hold).
  static constexpr std::size_t chunk_bytes(std::size_t host_bytes) { return host_bytes; }
};
template <>
struct space_traits<cuda> {
  static constexpr bool host_memory = false;
  static constexpr bool commits_on_write = false;  // a device allocation holds all of its memory at once
  // Whole levels at once: a launch needs the parallelism, and the device's memory holds the bytes.
  static constexpr std::size_t chunk_bytes(std::size_t) { return std::size_t(1) << 30; }
};

// The base of every h2expr type that holds or applies values of type T in a space (matrices, sparse and
// H2 matrices, samplers, expressions): it checks the arguments, with a message that names them, and
// names them as value_type and space.
template <class T, class Space>
struct values_in_space {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "h2expr: T must be float or double");
  static_assert(is_space_v<Space>, "h2expr: Space must be h2expr::host or h2expr::cuda");
  using value_type = T;
  using space = Space;
};
}  // namespace detail

// Per-space state: handles, stream and workspace (see context.hpp). Shared by the objects that use it.
template <class Space>
class context;
template <class Space>
using context_ptr = std::shared_ptr<context<Space>>;

}  // namespace h2expr
