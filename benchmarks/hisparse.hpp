#pragma once
// HiSparse against CSR (issue 24): bytes per non-zero, and H X, H^T X with 1, 16 and 64 vectors against
// sparse_matrix (our CSR path: on the host our own kernel, on the GPU cuSPARSE's SpMM; sparse_matrix
// stores a second, transposed CSR copy for H^T X) and, on the GPU, cuSPARSE's SpMM with the transposed
// operation on the one CSR copy (the paper's comparison). Generated matrices of 1e5 to 1e7 non-zeros:
// Poisson 2D and 3D, an R-MAT power-law graph (Graph500's parameters) in its generated order and
// randomly relabelled, a banded matrix and a block-structured FEM-like matrix.
#include <h2expr/hisparse_matrix.hpp>
#include <h2expr/matrix.hpp>
#include <h2expr/sparse_matrix.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "timing.hpp"

namespace h2expr::bench {

struct coo_matrix {
  std::string name;
  index rows = 0, cols = 0;
  std::vector<int> row, col;
};

// CSR arrays (duplicates summed by the constructors; values: 1 on off-diagonals, uniform elsewhere).
template <class T>
csr_arrays<T> to_csr(const coo_matrix& m) {
  csr_arrays<T> a;
  a.rows = m.rows;
  a.cols = m.cols;
  std::vector<std::size_t> order(m.row.size());
  std::iota(order.begin(), order.end(), std::size_t(0));
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return m.row[x] != m.row[y] ? m.row[x] < m.row[y] : m.col[x] < m.col[y]; });
  a.row_ptr.assign(std::size_t(m.rows) + 1, 0);
  std::mt19937 g(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::size_t x = 0; x < order.size(); ++x) {
    const std::size_t e = order[x];
    if (x > 0 && m.row[e] == m.row[order[x - 1]] && m.col[e] == m.col[order[x - 1]]) continue;  // one per position
    a.col_idx.push_back(m.col[e]);
    a.values.push_back(T(u(g)));
    ++a.row_ptr[std::size_t(m.row[e]) + 1];
  }
  for (index r = 0; r < m.rows; ++r) a.row_ptr[std::size_t(r) + 1] += a.row_ptr[std::size_t(r)];
  return a;
}

inline coo_matrix poisson_2d(int n) {
  coo_matrix m{"Poisson 2D " + std::to_string(n) + "^2", index(n) * n, index(n) * n, {}, {}};
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      const int i = x + y * n;
      auto link = [&](int x2, int y2) {
        if (x2 >= 0 && x2 < n && y2 >= 0 && y2 < n) m.row.push_back(i), m.col.push_back(x2 + y2 * n);
      };
      link(x, y), link(x - 1, y), link(x + 1, y), link(x, y - 1), link(x, y + 1);
    }
  return m;
}
inline coo_matrix poisson_3d(int n) {
  coo_matrix m{"Poisson 3D " + std::to_string(n) + "^3", index(n) * n * n, index(n) * n * n, {}, {}};
  for (int z = 0; z < n; ++z)
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        const int i = x + n * (y + n * z);
        auto link = [&](int x2, int y2, int z2) {
          if (x2 >= 0 && x2 < n && y2 >= 0 && y2 < n && z2 >= 0 && z2 < n)
            m.row.push_back(i), m.col.push_back(x2 + n * (y2 + n * z2));
        };
        link(x, y, z), link(x - 1, y, z), link(x + 1, y, z), link(x, y - 1, z), link(x, y + 1, z), link(x, y, z - 1),
            link(x, y, z + 1);
      }
  return m;
}
// R-MAT (Chakrabarti et al.; Graph500: a = 0.57, b = c = 0.19): 2^scale vertices, edge_factor edges per
// vertex, directed. Relabelled: the vertices randomly permuted (Graph500 does this), which takes away
// the locality of R-MAT's recursive quadrants.
inline coo_matrix rmat(int scale, int edge_factor, bool relabel) {
  const index n = index(1) << scale;
  coo_matrix m{std::string("R-MAT power-law graph 2^") + std::to_string(scale) + (relabel ? ", relabelled" : ""), n, n,
               {}, {}};
  std::mt19937_64 g(42);
  std::uniform_real_distribution<double> u(0, 1);
  const index edges = n * edge_factor;
  for (index e = 0; e < edges; ++e) {
    int r = 0, c = 0;
    for (int b = 0; b < scale; ++b) {
      const double p = u(g);
      const int quad = p < 0.57 ? 0 : p < 0.76 ? 1 : p < 0.95 ? 2 : 3;
      r = r << 1 | (quad >> 1), c = c << 1 | (quad & 1);
    }
    m.row.push_back(r), m.col.push_back(c);
  }
  if (relabel) {
    std::vector<int> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), g);
    for (auto& r : m.row) r = perm[std::size_t(r)];
    for (auto& c : m.col) c = perm[std::size_t(c)];
  }
  return m;
}
inline coo_matrix banded(index n, int half_width) {
  coo_matrix m{"banded n " + std::to_string(n) + ", width " + std::to_string(2 * half_width + 1), n, n, {}, {}};
  for (index i = 0; i < n; ++i)
    for (index j = std::max<index>(0, i - half_width); j <= std::min<index>(n - 1, i + half_width); ++j)
      m.row.push_back(int(i)), m.col.push_back(int(j));
  return m;
}
// Trilinear hexahedral elements on an n^3 grid of nodes with 3 unknowns per node (elasticity-like): each
// node couples with its 27 neighbours, a dense 3 x 3 block per coupling.
inline coo_matrix block_fem(int n) {
  const index nodes = index(n) * n * n;
  coo_matrix m{"block FEM 3 x 3 blocks, " + std::to_string(n) + "^3 nodes", 3 * nodes, 3 * nodes, {}, {}};
  for (int z = 0; z < n; ++z)
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        const int i = x + n * (y + n * z);
        for (int dz = -1; dz <= 1; ++dz)
          for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
              const int x2 = x + dx, y2 = y + dy, z2 = z + dz;
              if (x2 < 0 || x2 >= n || y2 < 0 || y2 >= n || z2 < 0 || z2 >= n) continue;
              const int j = x2 + n * (y2 + n * z2);
              for (int a = 0; a < 3; ++a)
                for (int b = 0; b < 3; ++b) m.row.push_back(3 * i + a), m.col.push_back(3 * j + b);
            }
      }
  return m;
}

// A hook for the CUDA benchmark: the time of cuSPARSE's transposed SpMM on one CSR copy (0: none).
template <class T, class Space>
using transposed_csr_timer = std::function<double(const csr_arrays<T>&, const matrix<T, Space>&, matrix<T, Space>&)>;

template <class T, class Space>
void run_hisparse_benchmark(const std::vector<coo_matrix>& problems, const std::vector<int>& node_sizes,
                            const transposed_csr_timer<T, Space>& cusparse_transposed = {}) {
  auto ctx = default_context<Space>();
  std::printf("\n## Memory (bytes per stored non-zero; CSR: one copy, int indices; sparse_matrix holds two)\n\n");
  std::printf("| %-48s | %10s | %9s | %4s | %9s | %9s | %6s | %8s | %-40s |\n", "matrix", "rows", "nnz", "d", "CSR",
              "HiSparse", "ratio", "build s", "nodes (coo1/coo2/coo4/dense/inner/dinner)");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(50, '-').c_str(), std::string(12, '-').c_str(),
              std::string(11, '-').c_str(), std::string(6, '-').c_str(), std::string(11, '-').c_str(),
              std::string(11, '-').c_str(), std::string(8, '-').c_str(), std::string(10, '-').c_str(),
              std::string(42, '-').c_str());
  std::vector<csr_arrays<T>> csrs;
  for (const auto& p : problems) {
    csrs.push_back(to_csr<T>(p));
    const auto& a = csrs.back();
    const double nnz = double(a.values.size());
    const double csr_bytes = double(a.values.size()) * (sizeof(int) + sizeof(T)) + double(a.rows + 1) * sizeof(int);
    for (int d : node_sizes) {
      const auto t0 = std::chrono::steady_clock::now();
      const auto H = hisparse_matrix<T, Space>::from_csr(a, ctx, {.node_size = d});
      ctx->synchronize();
      const double build = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto n = H.nodes();
      const std::string nodes = std::to_string(n.coo1) + "/" + std::to_string(n.coo2) + "/" + std::to_string(n.coo4) +
                                "/" + std::to_string(n.dense_leaf) + "/" + std::to_string(n.sparse_inner) + "/" +
                                std::to_string(n.dense_inner);
      std::printf("| %-48s | %10lld | %9.0f | %4d | %9.2f | %9.2f | %6.3f | %8.2f | %-40s |\n", p.name.c_str(),
                  (long long)a.rows, nnz, d, csr_bytes / nnz, double(H.memory_bytes()) / nnz,
                  double(H.memory_bytes()) / csr_bytes, build, nodes.c_str());
    }
  }
  std::printf("\n## Products Y = op(A) X (ms, best of 3 after a warm-up; d = %d)\n\n", node_sizes.front());
  std::printf("| %-48s | %3s | %10s | %10s | %10s | %10s | %10s | %7s | %7s |\n", "matrix", "nv", "CSR A X",
              "HiSp A X", "CSR A^T X", "HiSp A^T X", "cuSP A^T", "N ratio", "T ratio");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(50, '-').c_str(), std::string(5, '-').c_str(),
              std::string(12, '-').c_str(), std::string(12, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(12, '-').c_str(), std::string(9, '-').c_str(),
              std::string(9, '-').c_str());
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const auto& a = csrs[i];
    const auto S = sparse_matrix<T, Space>::from_csr(a.rows, a.cols, a.row_ptr, a.col_idx, a.values, ctx);
    const auto H = hisparse_matrix<T, Space>::from_csr(a, ctx, {.node_size = node_sizes.front()});
    for (int nv : {1, 16, 64}) {
      matrix<T, Space> X(a.cols, nv, ctx), Xt(a.rows, nv, ctx), Y(a.rows, nv, ctx), Yt(a.cols, nv, ctx);
      detail::fill(*ctx, X.data(), std::size_t(a.cols) * nv, T(1));
      detail::fill(*ctx, Xt.data(), std::size_t(a.rows) * nv, T(1));
      auto time = [&](auto&& f) { return best_seconds(*ctx, f, 3) * 1e3; };
      const double sn = time([&] { S.multiply(op::none, T(1), X.view(), T(0), Y.view()); });
      const double hn = time([&] { H.apply(op::none, T(1), X.view(), T(0), Y.view()); });
      const double st = time([&] { S.multiply(op::transpose, T(1), Xt.view(), T(0), Yt.view()); });
      const double ht = time([&] { H.apply(op::transpose, T(1), Xt.view(), T(0), Yt.view()); });
      const double ct = cusparse_transposed ? cusparse_transposed(a, Xt, Yt) * 1e3 : 0.0;
      std::printf("| %-48s | %3d | %10.3f | %10.3f | %10.3f | %10.3f | %10.3f | %7.2f | %7.2f |\n",
                  problems[i].name.c_str(), nv, sn, hn, st, ht, ct, sn / hn, (ct > 0 ? ct : st) / ht);
      std::fflush(stdout);
    }
  }
  std::printf("\nN ratio: CSR time / HiSparse time for A X; T ratio: the same for A^T X, against cuSPARSE's transposed\n"
              "SpMM where measured (the CUDA space), else against sparse_matrix's stored transpose.\n");
}

// The problems at a size factor (1: the 1e6-1e7 non-zeros; smaller for a quick look).
inline std::vector<coo_matrix> hisparse_problems(double f) {
  auto s = [f](double x) { return std::max(4, int(x * f)); };
  return {poisson_2d(s(1000)),       poisson_3d(s(100)),        rmat(std::max(10, int(std::log2(f * 262144.0))), 16, false),
          rmat(std::max(10, int(std::log2(f * 262144.0))), 16, true), banded(index(s(1000000)), 4), block_fem(s(30))};
}

}  // namespace h2expr::bench
