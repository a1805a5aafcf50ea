#pragma once
// Flags of the batched primitives (the BLAS/LAPACK vocabulary), shared by both backends.
namespace h2expr::detail {

enum class op { none, transpose };
enum class side { left, right };
enum class uplo { lower, upper };
enum class diag { non_unit, unit };
enum class distribution { normal, uniform };  // standard normal, or uniform in [0, 1)

}  // namespace h2expr::detail

namespace h2expr {
// Public: whether an operator applies as itself or transposed (sparse_matrix::multiply, the apply of
// a user's operand).
using op = detail::op;
}  // namespace h2expr
