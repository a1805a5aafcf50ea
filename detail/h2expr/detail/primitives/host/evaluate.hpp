#pragma once
// Kernel entries of many blocks at once, on the host: dense leaves (point sets of leaves) and
// coupling matrices (interpolation points of clusters).
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/primitives/block_points.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace h2expr::detail {

template <class T, int D, class Kernel>
void evaluate_blocks(context<host>&, const Kernel& kernel, const block_points<T>& p, T* out) {
  evaluate_blocks_into<T, D>(kernel, p, out);
}

template <class T>
bool all_finite(context<host>&, const T* data, std::size_t n) {
  bool ok = true;
#pragma omp parallel for reduction(&& : ok) schedule(static)
  for (std::int64_t i = 0; i < std::int64_t(n); ++i) ok = ok && std::isfinite(data[i]);
  return ok;
}

// The sum of the squares of the entries, in double (NaN or infinite when an entry is).
template <class T>
double sum_of_squares(context<host>&, const T* data, std::size_t n) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::int64_t i = 0; i < std::int64_t(n); ++i) sum += double(data[i]) * double(data[i]);
  return sum;
}

}  // namespace h2expr::detail
