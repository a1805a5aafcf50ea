#pragma once
// point_cloud<T, D>: the points (in the user's order) that a kernel matrix's rows and columns belong
// to. Generators for tensor grids on [0,1]^D (optionally perturbed) and for tightly clustered clouds.
#include <h2expr/detail/core/error.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace h2expr {

namespace detail {
// Uniform in [0, 1) from the top 53 bits: the same numbers on every standard library, unlike
// std::uniform_real_distribution, so that seeded point sets are reproducible everywhere.
inline double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

// Standard normal by Box-Muller (portable for the same reason).
inline double standard_normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform01(rng);  // (0, 1]: log is finite
  const double u2 = uniform01(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}
}  // namespace detail

template <class T, int D>
class point_cloud {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "h2expr: T must be float or double");
  static_assert(D >= 1 && D <= 3, "h2expr: point_cloud dimension D must be 1, 2 or 3");

 public:
  using value_type = T;
  using point = std::array<T, D>;
  static constexpr int dimension = D;

  explicit point_cloud(std::vector<point> coords) : coords_(std::move(coords)) {
    detail::require(!coords_.empty(), "point_cloud: the point set is empty");
    detail::require(coords_.size() <= std::size_t(std::numeric_limits<int>::max()),
                    "point_cloud: more points than an int can count");
    for (std::size_t i = 0; i < coords_.size(); ++i)
      for (int k = 0; k < D; ++k)
        detail::require<non_finite_value>(std::isfinite(coords_[i][k]),
                                          "point_cloud: coordinate " + std::to_string(k) + " of point " +
                                              std::to_string(i) + " is not finite");
  }

  // The tensor grid on [0,1]^D with dims[k] points along dimension k, end points included
  // (spacing h = 1/(dims[k]-1); a single point sits at 0.5), first dimension fastest. perturb > 0
  // moves each coordinate by perturb * h * u, u uniform in [-0.5, 0.5) (h = 1 for a single point).
  static point_cloud grid(std::array<int, D> dims, T perturb = 0, std::uint64_t seed = 0) {
    std::size_t n = 1;
    for (int k = 0; k < D; ++k) {
      detail::require(dims[k] >= 1, "point_cloud::grid: dims[" + std::to_string(k) + "] must be >= 1 (got " +
                                        std::to_string(dims[k]) + ")");
      n *= std::size_t(dims[k]);
      detail::require(n <= std::size_t(std::numeric_limits<int>::max()), "point_cloud::grid: too many points");
    }
    detail::require(std::isfinite(perturb) && perturb >= 0,
                    "point_cloud::grid: perturb must be finite and >= 0 (got " + std::to_string(perturb) + ")");
    std::array<double, D> h;
    for (int k = 0; k < D; ++k) h[k] = dims[k] > 1 ? 1.0 / (dims[k] - 1) : 1.0;
    std::mt19937_64 rng(seed);
    std::vector<point> coords(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t rest = i;
      for (int k = 0; k < D; ++k) {
        const std::size_t j = rest % std::size_t(dims[k]);
        rest /= std::size_t(dims[k]);
        double x = dims[k] > 1 ? double(j) * h[k] : 0.5;
        if (perturb > 0) x += double(perturb) * h[k] * (detail::uniform01(rng) - 0.5);
        coords[i][k] = T(x);
      }
    }
    return point_cloud(std::move(coords));
  }

  // n points in 4 tight Gaussian clusters (sigma 0.02, centres uniform in [0.2, 0.8]^D): strongly
  // non-uniform densities, for testing the clustering.
  static point_cloud clustered(int n, std::uint64_t seed) {
    detail::require(n >= 1, "point_cloud::clustered: n must be >= 1 (got " + std::to_string(n) + ")");
    constexpr int centres = 4;
    constexpr double sigma = 0.02;
    std::mt19937_64 rng(seed);
    std::array<std::array<double, D>, centres> c;
    for (auto& centre : c)
      for (int k = 0; k < D; ++k) centre[k] = 0.2 + 0.6 * detail::uniform01(rng);
    std::vector<point> coords(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      for (int k = 0; k < D; ++k) coords[i][k] = T(c[i % centres][k] + sigma * detail::standard_normal(rng));
    return point_cloud(std::move(coords));
  }

  int size() const { return int(coords_.size()); }
  const point& operator[](int i) const { return coords_[static_cast<std::size_t>(i)]; }
  const std::vector<point>& coords() const { return coords_; }

 private:
  std::vector<point> coords_;
};

}  // namespace h2expr
