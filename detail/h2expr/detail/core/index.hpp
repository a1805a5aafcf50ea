#pragma once
// Indices and sizes: the index type of shapes and offsets, and element counts as bytes, checked, for
// the allocations of both spaces.
#include <h2expr/detail/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace h2expr {

using index = std::int64_t;

namespace detail {

// The most elements of T one allocation may hold on either space: their bytes fit a ptrdiff_t.
template <class T>
constexpr std::size_t max_elements() {
  return std::size_t(PTRDIFF_MAX) / sizeof(T);
}
// n elements of T as bytes, or invalid_argument when the count cannot be represented.
template <class T>
std::size_t checked_bytes(std::size_t n) {
  require(n <= max_elements<T>(), "an allocation of " + std::to_string(n) + " elements of " +
                                      std::to_string(sizeof(T)) + " bytes: more bytes than memory can address");
  return n * sizeof(T);
}

}  // namespace detail
}  // namespace h2expr
