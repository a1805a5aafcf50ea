#pragma once
// Marshaling on the host: pointer arrays of batch items from a base pointer and strides or offsets.
#include <h2expr/detail/core/host/context.hpp>

#include <cstdint>

namespace h2expr::detail {

// out[i] = base + i * stride
template <class T>
void marshal_strided(context<host>&, T* base, std::int64_t stride, int count, T** out) {
  for (int i = 0; i < count; ++i) out[i] = base + i * stride;
}
// out[i] = base + offsets[i]
template <class T>
void marshal_offsets(context<host>&, T* base, const std::int64_t* offsets, int count, T** out) {
  for (int i = 0; i < count; ++i) out[i] = base + offsets[i];
}

}  // namespace h2expr::detail
