#pragma once
// Sparse test matrices shared by the sparse_matrix and hisparse_matrix suites (Eigen, host memory).
#include <Eigen/SparseCore>
#include <random>
#include <vector>

#include "support.hpp"

namespace h2expr::test {

template <class T>
using sparse = Eigen::SparseMatrix<T>;

// Entries drawn with probability `density`, standard normal values.
template <class T>
sparse<T> random_sparse(rng& g, int rows, int cols, double density) {
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> nd;
  std::vector<Eigen::Triplet<T>> t;
  for (int j = 0; j < cols; ++j)
    for (int i = 0; i < rows; ++i)
      if (u(g.engine) < density) t.emplace_back(i, j, T(nd(g.engine)));
  sparse<T> S(rows, cols);
  S.setFromTriplets(t.begin(), t.end());
  return S;
}

// The 5-point Laplacian of an nx x ny grid: with Dirichlet boundary (diagonal 4) it is SPD; with
// Neumann boundary (diagonal = number of neighbours) it is singular, its rows summing to 0.
template <class T>
sparse<T> laplacian_2d(int nx, int ny, bool neumann = false, double shift = 0) {
  std::vector<Eigen::Triplet<T>> t;
  auto id = [nx](int x, int y) { return x + y * nx; };
  for (int y = 0; y < ny; ++y)
    for (int x = 0; x < nx; ++x) {
      int degree = 0;
      auto link = [&](int x2, int y2) {
        if (x2 < 0 || x2 >= nx || y2 < 0 || y2 >= ny) return;
        t.emplace_back(id(x, y), id(x2, y2), T(-1));
        ++degree;
      };
      link(x - 1, y), link(x + 1, y), link(x, y - 1), link(x, y + 1);
      t.emplace_back(id(x, y), id(x, y), T((neumann ? degree : 4) - shift));
    }
  sparse<T> S(nx * ny, nx * ny);
  S.setFromTriplets(t.begin(), t.end());
  return S;
}

}  // namespace h2expr::test
