#pragma once
// The exceptions h2expr throws. Every failure is an h2expr::error, so `catch (const h2expr::error&)`
// catches all of them; the derived types say what went wrong.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace h2expr {

struct error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Operand sizes that do not fit together (A * X with A.cols() != X.rows(), ...).
struct dimension_mismatch : error {
  using error::error;
};

// An argument outside its domain (negative size, leaf_size < 1, eta <= 0, ...).
struct invalid_argument : error {
  using error::error;
};

// A tolerance that is not finite or not in (0, 1).
struct invalid_tolerance : invalid_argument {
  using invalid_argument::invalid_argument;
};

// An operation that needs a structure (cluster trees, matrix tree) got none and could deduce none.
struct missing_structure : error {
  using error::error;
};

// NaN or infinity in inputs, samples or kernel values.
struct non_finite_value : error {
  using error::error;
};

// A factorization met a matrix it cannot factor (Cholesky of a matrix that is not positive definite).
struct numerical_failure : error {
  using error::error;
};

// A sparse Cholesky factorization met a matrix that is not symmetric positive definite: indefinite,
// or singular to working precision.
struct not_positive_definite : numerical_failure {
  using numerical_failure::numerical_failure;
};

// An adaptive method hit its rank cap before reaching the requested tolerance.
struct rank_cap_reached : error {
  using error::error;
};

// A file could not be written, or read back as what it claims to be (save / load): missing,
// truncated, corrupted, of a newer format version, or holding the other value type.
struct file_error : error {
  using error::error;
};

// The CUDA space was asked for on a machine (or in a process) that has no CUDA device.
struct no_cuda_device : error {
  using error::error;
};

// An allocation on the device failed.
struct device_out_of_memory : error {
  using error::error;
};

// A CUDA runtime or library call failed; what() carries the library's own status text.
struct cuda_error : error {
  using error::error;
};
struct cublas_error : cuda_error {
  using cuda_error::cuda_error;
};
struct cusolver_error : cuda_error {
  using cuda_error::cuda_error;
};
struct curand_error : cuda_error {
  using cuda_error::cuda_error;
};
struct cusparse_error : cuda_error {
  using cuda_error::cuda_error;
};

// The processes of a distributed (MPI) call disagree about its arguments (shapes, tolerances, options,
// points): raised on every rank, so that none waits for the others in a collective.
struct ranks_disagree : error {
  using error::error;
};

namespace detail {
// Throws E with a message when a precondition does not hold.
template <class E = invalid_argument>
inline void require(bool condition, const std::string& message) {
  if (!condition) throw E("h2expr: " + message);
}
// A real number for a message, in three significant digits (1e-08, not std::to_string's 0.000000).
inline std::string number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.3g", v);
  return s;
}
}  // namespace detail

}  // namespace h2expr
