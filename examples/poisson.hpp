#pragma once
// The Schur complement problem of the HARA paper (section 4.3): the 5-point (2D) or 7-point (3D)
// Poisson operator on an n^D grid, split into the unknowns of one boundary face x = 0 (block 2, the
// interface) and all others (block 1). S = A22 - A21 A11^{-1} A12 is dense, and data-sparse in the
// coordinates of the face: its points (D - 1 dimensions) give the structure hara() builds S on.
// Shared by the Schur complement example, its test and its benchmark.
#include <h2expr/h2expr.hpp>

#include <Eigen/Sparse>
#include <array>
#include <vector>

namespace h2expr::examples {

template <class T, int D>
struct schur_problem {
  int n = 0;                                         // grid points per direction
  Eigen::SparseMatrix<T> A11, A12, A21, A22;         // the blocks, unknowns lexicographic per block
  std::vector<std::array<T, D - 1>> interface;       // face coordinates of block 2's unknowns, in [0, 1]
};

template <class T, int D>
schur_problem<T, D> poisson_schur_problem(int n) {
  static_assert(D == 2 || D == 3, "poisson_schur_problem: 2D or 3D grids");
  schur_problem<T, D> p;
  p.n = n;
  const long N = D == 2 ? long(n) * n : long(n) * n * n;
  // Unknown (i, j, k), i the x index: block 2 holds i = 0. Local numbers within each block.
  std::vector<int> local(N);
  std::vector<bool> on_face(N);
  int n1 = 0, n2 = 0;
  for (long g = 0; g < N; ++g) {
    on_face[g] = g % n == 0;
    local[g] = on_face[g] ? n2++ : n1++;
  }
  std::vector<Eigen::Triplet<T>> t11, t12, t21, t22;
  auto add = [&](long r, long c, T v) {
    const int lr = local[r], lc = local[c];
    if (!on_face[r] && !on_face[c]) t11.emplace_back(lr, lc, v);
    else if (!on_face[r]) t12.emplace_back(lr, lc, v);
    else if (!on_face[c]) t21.emplace_back(lr, lc, v);
    else t22.emplace_back(lr, lc, v);
  };
  long stride[3] = {1, n, long(n) * n};
  for (long g = 0; g < N; ++g) {
    add(g, g, T(2 * D));
    for (int d = 0; d < D; ++d) {
      const long coord = (g / stride[d]) % n;
      if (coord > 0) add(g, g - stride[d], T(-1));
      if (coord + 1 < n) add(g, g + stride[d], T(-1));
    }
  }
  p.A11.resize(n1, n1), p.A12.resize(n1, n2), p.A21.resize(n2, n1), p.A22.resize(n2, n2);
  p.A11.setFromTriplets(t11.begin(), t11.end());
  p.A12.setFromTriplets(t12.begin(), t12.end());
  p.A21.setFromTriplets(t21.begin(), t21.end());
  p.A22.setFromTriplets(t22.begin(), t22.end());
  const T h = T(1) / T(n > 1 ? n - 1 : 1);
  for (long g = 0; g < N; g += n) {
    std::array<T, D - 1> x;
    for (int d = 1; d < D; ++d) x[d - 1] = T((g / stride[d]) % n) * h;
    p.interface.push_back(x);
  }
  return p;
}

}  // namespace h2expr::examples
