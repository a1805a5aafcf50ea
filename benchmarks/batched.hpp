#pragma once
// Batched primitives, timed on one space: uniform and non-uniform gemm, QR, column-pivoted QR, SVD,
// Cholesky. Rates are nominal LAPACK flop counts over the best time; the ceiling is the rate of one
// large dense gemm on the same space, measured here (see ceiling_gflops in the mains).
#include <h2expr/detail/primitives/block_batch.hpp>
#include <h2expr/h2expr.hpp>

#include <random>
#include <string>
#include <vector>

#include "timing.hpp"

namespace h2expr::bench {

namespace hd = h2expr::detail;

template <class T, class Space>
struct random_batch {
  hd::block_batch<T, Space> blocks;
  hd::buffer<int, Space> rows, cols;
  random_batch(context_ptr<Space> ctx, const std::vector<int>& m, const std::vector<int>& n, std::uint64_t seed)
      : blocks(ctx, m, n), rows(ctx, m), cols(ctx, n) {
    hd::fill_random_vbatched(*ctx, hd::distribution::normal, blocks.rows(), blocks.cols(), blocks.pointers(),
                             blocks.ld(), seed, blocks.count(), blocks.max_rows(), blocks.max_cols());
  }
};

inline std::vector<int> sizes(int count, int lo, int hi, std::uint64_t seed) {
  std::mt19937 gen{unsigned(seed)};
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> s(count);
  for (auto& x : s) x = d(gen);
  return s;
}

template <class T>
const char* scalar_name() {
  return sizeof(T) == 8 ? "double" : "float";
}

template <class T, class Space>
void gemm_rows(context_ptr<Space> ctx, double ceiling, int count, int lo, int hi) {
  const auto m = sizes(count, lo, hi, 1), n = sizes(count, lo, hi, 2), k = sizes(count, lo, hi, 3);
  random_batch<T, Space> A(ctx, m, k, 4), B(ctx, k, n, 5), C(ctx, m, n, 6);
  hd::buffer<int, Space> K(ctx, k);
  double flop = 0;
  for (int i = 0; i < count; ++i) flop += 2.0 * m[i] * n[i] * k[i];
  const std::string what = std::to_string(count) + " x " + (lo == hi ? std::to_string(lo) + "^3" :
                           std::to_string(lo) + ".." + std::to_string(hi)) + " " + scalar_name<T>();
  if (lo == hi) {
    const double t = best_seconds(*ctx, [&] {
      hd::gemm_batched(*ctx, hd::op::none, hd::op::none, lo, lo, lo, T(1), (const T* const*)A.blocks.pointers(), lo,
                       (const T* const*)B.blocks.pointers(), lo, T(0), C.blocks.pointers(), lo, count);
    });
    print_row("gemm uniform, pointer arrays, " + what, t, flop * 1e-9, ceiling);
  }
  const double t = best_seconds(*ctx, [&] {
    hd::gemm_vbatched(*ctx, hd::op::none, hd::op::none, C.rows.data(), C.cols.data(), K.data(), T(1),
                      (const T* const*)A.blocks.pointers(), A.blocks.ld(), (const T* const*)B.blocks.pointers(),
                      B.blocks.ld(), T(0), C.blocks.pointers(), C.blocks.ld(), count, hi, hi, hi);
  });
  print_row("gemm non-uniform (vbatched), " + what, t, flop * 1e-9, ceiling);
}

template <class T, class Space>
void factorization_rows(context_ptr<Space> ctx, double ceiling, int count, int m_lo, int m_hi, int n) {
  const auto m = sizes(count, m_lo, m_hi, 7);
  const std::vector<int> ns(count, n);
  random_batch<T, Space> A(ctx, m, ns, 8);
  std::vector<int> p(count);
  for (int i = 0; i < count; ++i) p[i] = std::min(m[i], n);
  hd::block_batch<T, Space> R(ctx, p, ns), S(ctx, p, std::vector<int>(count, 1)), V(ctx, ns, p);
  hd::block_batch<int, Space> perm(ctx, ns, std::vector<int>(count, 1));
  hd::buffer<int, Space> rank(ctx, std::size_t(count));
  hd::block_batch<T, Space> work(ctx, m, ns);
  auto restore = [&] { hd::copy(*ctx, A.blocks.data(), work.data(), std::size_t(A.blocks.total_size())); };
  double qr_flop = 0;
  for (int i = 0; i < count; ++i) qr_flop += 4.0 * m[i] * n * n - 4.0 * n * n * n / 3.0;  // geqrf + orgqr
  const std::string what = std::to_string(count) + " x (" + std::to_string(m_lo) + ".." + std::to_string(m_hi) +
                           ") x " + std::to_string(n) + " " + scalar_name<T>();
  double t = best_seconds(*ctx, [&] {
    restore();
    hd::qr_vbatched(*ctx, A.rows.data(), A.cols.data(), work.pointers(), work.ld(), R.pointers(), R.ld(), count,
                    m_hi, n);
  });
  print_row("QR (thin Q and R), " + what, t, qr_flop * 1e-9, ceiling);
  t = best_seconds(*ctx, [&] {
    restore();
    hd::cpqr_vbatched(*ctx, A.rows.data(), A.cols.data(), work.pointers(), work.ld(), R.pointers(), R.ld(),
                      perm.pointers(), rank.data(), T(1e-6), count, m_hi, n);
  });
  print_row("column-pivoted QR, " + what, t, qr_flop * 1e-9, ceiling);
  t = best_seconds(*ctx, [&] {
    restore();
    hd::svd_vbatched(*ctx, A.rows.data(), A.cols.data(), work.pointers(), work.ld(), S.pointers(), V.pointers(),
                     V.ld(), count, m_hi, n);
  });
  // SVD: no fixed flop count (Jacobi sweeps vary); rated at the QR count to compare cost, marked so.
  print_row("SVD (thin U S V), QR-flop equivalent, " + what, t, qr_flop * 1e-9, ceiling);
}

template <class T, class Space>
void cholesky_rows(context_ptr<Space> ctx, double ceiling, int count, int n) {
  const std::vector<int> ns(count, n);
  hd::block_batch<T, Space> G(ctx, ns, ns), work(ctx, ns, ns);
  // SPD inputs: G_i = X_i X_i^T + n I, built with the batched gemm itself.
  random_batch<T, Space> X(ctx, ns, ns, 9);
  hd::gemm_batched(*ctx, hd::op::none, hd::op::transpose, n, n, n, T(1), (const T* const*)X.blocks.pointers(), n,
                   (const T* const*)X.blocks.pointers(), n, T(0), G.pointers(), n, count);
  std::vector<T> shift(std::size_t(n) * n, T(0));
  for (int j = 0; j < n; ++j) shift[std::size_t(j) * n + j] = T(n);
  hd::buffer<T, Space> I(ctx, shift);
  std::vector<const T*> eye(count, I.data());
  hd::buffer<const T*, Space> eyes(ctx, eye);
  {  // G_i += n I through a gemm with the identity: keeps this benchmark on the primitives only
    std::vector<T> id(std::size_t(n) * n, T(0));
    for (int j = 0; j < n; ++j) id[std::size_t(j) * n + j] = T(1);
    hd::buffer<T, Space> Id(ctx, id);
    std::vector<const T*> idp(count, Id.data());
    hd::buffer<const T*, Space> ids(ctx, idp);
    hd::gemm_batched(*ctx, hd::op::none, hd::op::none, n, n, n, T(1), eyes.data(), n, ids.data(), n, T(1),
                     G.pointers(), n, count);
    ctx->synchronize();
  }
  hd::buffer<int, Space> info(ctx, std::size_t(count)), N(ctx, ns);
  const double flop = count * (n * double(n) * n / 3.0);
  auto restore = [&] { hd::copy(*ctx, G.data(), work.data(), std::size_t(G.total_size())); };
  const std::string what = std::to_string(count) + " x " + std::to_string(n) + "^2 " + scalar_name<T>();
  double t = best_seconds(*ctx, [&] {
    restore();
    hd::potrf_batched(*ctx, n, work.pointers(), n, info.data(), count);
  });
  print_row("Cholesky uniform, " + what, t, flop * 1e-9, ceiling);
  t = best_seconds(*ctx, [&] {
    restore();
    hd::potrf_vbatched(*ctx, N.data(), work.pointers(), work.ld(), info.data(), count, n);
  });
  print_row("Cholesky non-uniform path, " + what, t, flop * 1e-9, ceiling);
}

template <class T, class Space>
void run_all(context_ptr<Space> ctx, double ceiling, double scale) {
  const int many = int(10000 * scale);
  gemm_rows<T, Space>(ctx, ceiling, many, 32, 32);
  gemm_rows<T, Space>(ctx, ceiling, many, 64, 64);
  gemm_rows<T, Space>(ctx, ceiling, many, 32, 64);
  factorization_rows<T, Space>(ctx, ceiling, int(2000 * scale), 64, 128, 32);
  factorization_rows<T, Space>(ctx, ceiling, int(1000 * scale), 64, 64, 64);
  cholesky_rows<T, Space>(ctx, ceiling, many, 32);
}

}  // namespace h2expr::bench
