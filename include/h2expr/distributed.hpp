#pragma once
// h2expr::distributed: H2 matrices split over the ranks of an MPI communicator (a program includes
// this header and links MPI::MPI_CXX besides h2expr::h2expr; the rest of h2expr needs no MPI).
//   namespace hd = h2expr::distributed;
//   auto A = hd::h2_matrix<double>::from_kernel(MPI_COMM_WORLD, points, kernel, options);  // collective
//   const std::vector<hx::index>& mine = A.local_indices();  // the points this rank owns
//   hx::matrix<double> Y = A * X, Z = hx::transpose(A) * X;  // X, Y, Z: this rank's rows, in mine's order
//   hx::orthogonalize(A); auto rep = hx::compress(A, 1e-4);  // collective
//   auto P = hx::hara(A * A, 1e-4);                           // collective; P is split like A
//   double e = hx::relative_error(P, A * A, 10);               // expressions of distributed operands
//   auto Ap = hd::h2_matrix<double>::from_local_points(MPI_COMM_WORLD, my_points, kernel);  // each rank its points
//   auto plan = hd::redistribution::contiguous(Ap, my_points.size());  // the user's rows <-> the matrix's
// Defined in detail/h2expr/detail/distributed/ (the layers: README, "How the code is laid out").
#include <h2expr/detail/distributed/expression.hpp>
#include <h2expr/detail/distributed/h2_matrix.hpp>
#include <h2expr/detail/distributed/hara.hpp>
#include <h2expr/detail/distributed/redistribution.hpp>
