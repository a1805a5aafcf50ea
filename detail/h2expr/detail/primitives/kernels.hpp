#pragma once
// Built-in kernels k(x, y) of a distance r = |x - y|. They are callable on the host and, in CUDA
// translation units, on the device, so h2_matrix<T, cuda>::from_kernel evaluates their entries on
// the GPU. Any other callable k(const std::array<T, D>&, const std::array<T, D>&) -> T works too;
// on the CUDA space its entries are computed on the host and copied over (see h2_matrix.hpp).
#include <array>
#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define H2EXPR_HOST_DEVICE __host__ __device__
#else
#define H2EXPR_HOST_DEVICE
#endif

namespace h2expr {

namespace detail {
template <class T, std::size_t D>
H2EXPR_HOST_DEVICE inline T distance(const std::array<T, D>& x, const std::array<T, D>& y) {
  T s = 0;
  for (std::size_t d = 0; d < D; ++d) s += (x[d] - y[d]) * (x[d] - y[d]);
  return sqrt(s);
}
// Kernels that declare `device_callable` can be evaluated inside CUDA kernels.
template <class K, class = void>
struct is_device_kernel : std::false_type {};
template <class K>
struct is_device_kernel<K, std::void_t<decltype(K::device_callable)>> : std::bool_constant<K::device_callable> {};
// Kernels that declare `symmetric = true` give symmetric matrices (hara samples them as such).
template <class K, class = void>
struct is_symmetric_kernel : std::false_type {};
template <class K>
struct is_symmetric_kernel<K, std::void_t<decltype(K::symmetric)>> : std::bool_constant<K::symmetric> {};
}  // namespace detail

namespace kernels {

// exp(-r / l): the covariance of TARGETS.md's reference problems.
struct exponential {
  double length = 0.1;
  static constexpr bool device_callable = true;
  static constexpr bool symmetric = true;  // k(x, y) = k(y, x): the matrix is symmetric
  template <class T, std::size_t D>
  H2EXPR_HOST_DEVICE T operator()(const std::array<T, D>& x, const std::array<T, D>& y) const {
    return exp(-detail::distance(x, y) / T(length));
  }
};

// exp(-r^2 / l^2)
struct gaussian {
  double length = 0.1;
  static constexpr bool device_callable = true;
  static constexpr bool symmetric = true;  // k(x, y) = k(y, x): the matrix is symmetric
  template <class T, std::size_t D>
  H2EXPR_HOST_DEVICE T operator()(const std::array<T, D>& x, const std::array<T, D>& y) const {
    const T r = detail::distance(x, y) / T(length);
    return exp(-r * r);
  }
};

// Matern with nu = 3/2: (1 + sqrt(3) r / l) exp(-sqrt(3) r / l)
struct matern {
  double length = 0.1;
  static constexpr bool device_callable = true;
  static constexpr bool symmetric = true;  // k(x, y) = k(y, x): the matrix is symmetric
  template <class T, std::size_t D>
  H2EXPR_HOST_DEVICE T operator()(const std::array<T, D>& x, const std::array<T, D>& y) const {
    const T s = T(1.7320508075688772) * detail::distance(x, y) / T(length);
    return (1 + s) * exp(-s);
  }
};

// 1 / sqrt(r^2 + delta^2): the inverse distance, regularized so the diagonal stays finite.
struct inverse_distance {
  double delta = 1e-3;
  static constexpr bool device_callable = true;
  static constexpr bool symmetric = true;  // k(x, y) = k(y, x): the matrix is symmetric
  template <class T, std::size_t D>
  H2EXPR_HOST_DEVICE T operator()(const std::array<T, D>& x, const std::array<T, D>& y) const {
    const T r = detail::distance(x, y);
    return 1 / sqrt(r * r + T(delta) * T(delta));
  }
};

}  // namespace kernels
}  // namespace h2expr
