// The Schur complement of a Poisson problem as an H2 matrix (the HARA paper, section 4.3):
//
//   auto S = hx::hara(A22 - A21 * hx::solve(hx::cholesky(A11)) * A12, tol, {.structure = interface});
//
// The blocks come from the 5-point (2D) or 7-point (3D) Laplacian with one boundary face as block 2.
// A11 is factored once (sparse Cholesky, fill-reducing ordering); hara samples the expression with
// blocks of vectors: two sparse products and two triangular solves per block. Prints the times, the
// samples, the ranks, the memory and the error (randomized estimate against the expression itself);
// exits 1 when the error misses 2 tol. With off_diagonal = "hisparse", A12 is a hisparse_matrix H12 and
// A21 = A12^T is its transposed state (one copy of the block instead of sparse_matrix's four):
//
//   auto S = hx::hara(A22 - hx::transpose(H12) * hx::solve(F) * H12, tol, {.structure = interface});
#pragma once
#include <h2expr/h2expr.hpp>

#include <chrono>
#include <cstdio>
#include <string>

#include "poisson.hpp"

// S = hara(A22 - A21 solve(F) A12): prints its time, samples, memory, error and ranks.
template <class A22_, class A21_, class F_, class A12_, class Structure>
int schur_of(const A22_& A22, const A21_& A21, const F_& F, const A12_& A12, const Structure& interface, double tol) {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  hx::hara_report rep;
  const auto t1 = clock::now();
  auto S = hx::hara(A22 - A21 * hx::solve(F) * A12, tol, {.structure = interface, .report = &rep});
  const double hara_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  const double err = hx::relative_error(S, A22 - A21 * hx::solve(F) * A12, /*probes=*/10);

  std::printf("S = hara(A22 - A21 * solve(cholesky(A11)) * A12, %.0e): %.2f s, %d samples, %.2f MB, error %.2e%s\n",
              tol, hara_seconds, rep.samples, S.memory_bytes() / 1e6, err, S.symmetric() ? " (sampled as symmetric)" : "");
  std::printf("  time: sampling %.2f s, ARA %.2f s, updates %.2f s, recompression %.2f s\n", rep.seconds_sampling,
              rep.seconds_ara, rep.seconds_update, rep.seconds_compress);
  std::printf("  ranks per level:");
  for (int r : S.ranks()) std::printf(" %d", r);
  std::printf("\n");
  return err <= 2 * tol ? 0 : 1;
}

template <class Space, int D>
int schur_complement(const char* space_name, int n, double tol, const std::string& off_diagonal = "csr") {
  namespace hx = h2expr;
  using clock = std::chrono::steady_clock;
  auto p = hx::examples::poisson_schur_problem<double, D>(n);
  auto A11 = hx::sparse_matrix<double, Space>::from_eigen(p.A11);
  auto A12 = hx::sparse_matrix<double, Space>::from_eigen(p.A12);
  auto A21 = hx::sparse_matrix<double, Space>::from_eigen(p.A21);
  auto A22 = hx::sparse_matrix<double, Space>::from_eigen(p.A22);
  // The interface points (D - 1 dimensions): weak admissibility in 2D, standard in 3D, as in the paper.
  auto interface = D == 2 ? hx::structure<double>::weak(A22.rows(), 64)
                          : hx::structure<double>::from_points(hx::point_cloud<double, D - 1>(p.interface),
                                                               {.leaf_size = 64, .eta = 0.9});
  std::printf("%dD Poisson on a %d^%d grid (%s): A11 %lld unknowns, S %lld x %lld\n", D, n, D, space_name,
              (long long)A11.rows(), (long long)A22.rows(), (long long)A22.rows());

  const auto t0 = clock::now();
  auto F = hx::cholesky(A11);
  const double factor_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  std::printf("cholesky(A11): %.2f s, %zu nonzeros in L\n", factor_seconds, F.factor_nnz());
  if (off_diagonal == "hisparse") {
    const auto H12 = hx::hisparse_matrix<double, Space>::from_eigen(p.A12);
    std::printf("off-diagonal blocks: hisparse_matrix H12, %.3f MB (sparse_matrix A12 and A21: %.3f MB)\n",
                H12.memory_bytes() / 1e6, (A12.memory_bytes() + A21.memory_bytes()) / 1e6);
    return schur_of(A22, hx::transpose(H12), F, H12, interface, tol);
  }
  std::printf("off-diagonal blocks: sparse_matrix A12, A21, %.3f MB\n", (A12.memory_bytes() + A21.memory_bytes()) / 1e6);
  return schur_of(A22, A21, F, A12, interface, tol);
}
