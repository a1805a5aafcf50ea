#pragma once
// Memory of the host space: aligned allocation and copies. Same names as the CUDA space's memory.cuh.
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/core/index.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string>

namespace h2expr::detail {

// Large blocks come from the context's cache (host/pool.hpp), small ones from the heap; n tells
// deallocate which.
// A request the host cannot meet raises device_out_of_memory (the host space's device is the host).
template <class T>
T* allocate(context<host>& c, std::size_t n) {
  if (n == 0) return nullptr;
  const std::size_t bytes = checked_bytes<T>(n);
  try {
    return static_cast<T*>(host_allocate_bytes(c.pool(), bytes));
  } catch (const std::bad_alloc&) {
    throw device_out_of_memory("h2expr: host allocation of " + std::to_string(bytes) + " bytes failed");
  }
}
// The bytes an algorithm may still plan to hold (context::memory_limit): the system's available memory
// (MemAvailable: free and reclaimable pages) and the blocks the cache holds, or the limit set.
inline std::size_t memory_available(context<host>& c) {
  if (c.memory_limit() > 0) return c.memory_limit();
  const std::size_t system = system_available_memory();
  return system == std::numeric_limits<std::size_t>::max() ? system : system + c.cached_bytes();
}

template <class T>
void deallocate(context<host>& c, T* p, std::size_t n) noexcept {
  host_free_bytes(c.pool(), p, n * sizeof(T));
}

template <class T>
void copy(context<host>&, const T* src, T* dst, std::size_t n) {
  if (n) std::memcpy(dst, src, n * sizeof(T));
}
// dst(0:rows, 0:cols) = src(0:rows, 0:cols), column-major with leading dimensions.
template <class T>
void copy_2d(context<host>&, std::size_t rows, std::size_t cols, const T* src, std::size_t lds, T* dst,
             std::size_t ldd) {
  for (std::size_t j = 0; j < cols; ++j) std::copy_n(src + j * lds, rows, dst + j * ldd);
}
// Transfers between the space and ordinary host memory (plain copies here).
template <class T>
void download_2d(context<host>& c, std::size_t rows, std::size_t cols, const T* src, std::size_t lds,
                 T* host_dst, std::size_t ldd) {
  copy_2d(c, rows, cols, src, lds, host_dst, ldd);
}
template <class T>
void upload_2d(context<host>& c, std::size_t rows, std::size_t cols, const T* host_src, std::size_t lds,
               T* dst, std::size_t ldd) {
  copy_2d(c, rows, cols, host_src, lds, dst, ldd);
}
}  // namespace h2expr::detail
