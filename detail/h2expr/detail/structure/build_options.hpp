#pragma once
// build_options: how a structure is built from points (cluster sizes, admissibility) and how an
// h2_matrix is built from a kernel (Chebyshev points). Members in this order, so designated
// initializers work in any subset: {.leaf_size = 64, .eta = 0.9, .cheb_points = 8}.
#include <h2expr/detail/core/error.hpp>

#include <cmath>
#include <string>

namespace h2expr {

struct build_options {
  int leaf_size = 64;               // clusters are split while larger than this
  double eta = 0.9;                 // general admissibility: 0.5 * (diam_t + diam_s) <= eta * |c_t - c_s|
  int cheb_points = 8;              // Chebyshev points per dimension (used by h2_matrix::from_kernel)
  bool weak_admissibility = false;  // true: every off-diagonal block of a level is admissible
};

// Throws h2expr::invalid_argument when an option is outside its domain.
inline void validate(const build_options& bo) {
  detail::require(bo.leaf_size >= 1, "build_options: leaf_size must be >= 1 (got " + std::to_string(bo.leaf_size) + ")");
  detail::require(std::isfinite(bo.eta) && bo.eta > 0,
                  "build_options: eta must be finite and > 0 (got " + std::to_string(bo.eta) + ")");
  detail::require(bo.cheb_points >= 1,
                  "build_options: cheb_points must be >= 1 (got " + std::to_string(bo.cheb_points) + ")");
}

}  // namespace h2expr
