#pragma once
// Random fills on the host. A counter-based generator (SplitMix64 over a per-column key) makes each
// entry a function of (seed, item, column, row) alone: results do not depend on the thread count.
#include <h2expr/detail/core/blas_types.hpp>
#include <h2expr/detail/core/host/context.hpp>
#include <h2expr/detail/core/splitmix.hpp>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

namespace h2expr::detail {

// Fills one column (rows entries) of item `item` of a batch.
template <class T>
void fill_random_column(distribution d, std::uint64_t seed, std::uint64_t item, std::uint64_t column, T* out,
                        std::int64_t rows) {
  const std::uint64_t key = splitmix64(splitmix64(seed ^ 0x5851f42d4c957f2dull) + item) ^ splitmix64(~column);
  auto unit = [&](std::uint64_t counter) {  // uniform in [0, 1), 53 random bits
    return double(splitmix64(key + counter * 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53;
  };
  if (d == distribution::uniform) {
    for (std::int64_t i = 0; i < rows; ++i) out[i] = T(unit(std::uint64_t(i)));
    return;
  }
  for (std::int64_t i = 0; i < rows; i += 2) {  // Box-Muller, one pair of entries per pair of draws
    const double u1 = 1.0 - unit(std::uint64_t(i)), u2 = unit(std::uint64_t(i) + 1);
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
    out[i] = T(r * std::cos(a));
    if (i + 1 < rows) out[i + 1] = T(r * std::sin(a));
  }
}

// Entry `row` of what fill_random_column writes (the same bits), alone: for a rank of a distributed
// operator that holds some rows of a vector, so that its vectors are those of one process.
template <class T>
T random_entry(distribution d, std::uint64_t seed, std::uint64_t item, std::uint64_t column, std::int64_t row) {
  const std::uint64_t key = splitmix64(splitmix64(seed ^ 0x5851f42d4c957f2dull) + item) ^ splitmix64(~column);
  auto unit = [&](std::uint64_t counter) { return double(splitmix64(key + counter * 0x9e3779b97f4a7c15ull) >> 11) * 0x1.0p-53; };
  if (d == distribution::uniform) return T(unit(std::uint64_t(row)));
  const std::int64_t i = row & ~std::int64_t(1);
  const double u1 = 1.0 - unit(std::uint64_t(i)), u2 = unit(std::uint64_t(i) + 1);
  const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * std::numbers::pi * u2;
  return row == i ? T(r * std::cos(a)) : T(r * std::sin(a));
}

// A(0:rows, 0:cols) of one matrix; columns in parallel.
template <class T>
void fill_random(context<host>&, distribution d, std::int64_t rows, std::int64_t cols, T* A, std::int64_t lda,
                 std::uint64_t seed) {
#pragma omp parallel for schedule(static)
  for (std::int64_t j = 0; j < cols; ++j) fill_random_column(d, seed, 0, std::uint64_t(j), A + j * lda, rows);
}

// Item i of the batch is an m[i] x n[i] block at A[i] with leading dimension lda[i].
template <class T>
void fill_random_vbatched(context<host>&, distribution d, const int* m, const int* n, T* const* A,
                          const int* lda, std::uint64_t seed, int count, int /*max_m*/, int /*max_n*/) {
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < count; ++i)
    for (int j = 0; j < n[i]; ++j)
      fill_random_column(d, seed, std::uint64_t(i), std::uint64_t(j), A[i] + std::int64_t(j) * lda[i], m[i]);
}

}  // namespace h2expr::detail
