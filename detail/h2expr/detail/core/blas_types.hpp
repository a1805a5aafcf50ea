#pragma once
// Flags of the batched primitives (the BLAS/LAPACK vocabulary), shared by both backends.
namespace h2expr::detail {

enum class op { none, transpose };
enum class side { left, right };
enum class uplo { lower, upper };
enum class diag { non_unit, unit };
enum class distribution { normal, uniform };  // standard normal, or uniform in [0, 1)

}  // namespace h2expr::detail
