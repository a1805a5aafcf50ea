#pragma once
// hara(op, tol, options): a new compressed H2 matrix from products of the operator with blocks of
// vectors alone (the HARA paper, section 3), on the operator's space. `op` is any expression: an H2
// matrix, a sampler, sums, products, transposes and Cholesky solves of them (expression.hpp):
//
//   auto P = hx::hara(A * A, 1e-4);                          // structure deduced from A
//   auto L = hx::hara(hx::sampler<double>(n, f), 1e-4, {.structure = A.structure()});
//   double err = hx::relative_error(P, A * A, 10);
//
// The tolerance is relative, in the Frobenius norm: ||P - M||_F <~ tol ||M||_F. Identity and diagonal
// terms of a sum (K + 1e-2 * hx::identity<double>(n)), a sampler's diagonal part, are not sampled: they
// go into P's dense diagonal leaves exactly.
//
// One set of samples serves every level (detail/randomized/hara_one_sample_set.hpp): about 1.5 times a near
// field's rows (the nodes of a level whose blocks with a node are not admissible) plus the ranks plus
// converge_samples columns (and as many of M^T for a general operator), whatever n. Every structure
// the library builds has near fields that nest so: weak (HSS-like) ones (structure::weak, the 2D
// Schur complements), 1D, 2D and 3D kernels at any eta. For a structure whose near fields do not
// nest, hara builds level by level from the root on the weak sampling tree (detail/randomized/hara.hpp).
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/expressions/evaluate.hpp>
#include <h2expr/detail/h2/add_diagonal.hpp>
#include <h2expr/detail/h2/h2_matrix.hpp>
#include <h2expr/detail/randomized/hara.hpp>
#include <h2expr/detail/randomized/hara_one_sample_set.hpp>
#include <h2expr/detail/randomized/sampler.hpp>
#include <h2expr/detail/structure/structure.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

namespace h2expr {

// What hara did, level by level (levels[i].level: the tree level; depth + 1: the dense diagonal, or for
// the one-sample-set construction the samples: all of them and their time; its tree levels carry
// ranks and the time of their share of the construction).
struct hara_report {
  std::vector<detail::hara_level_report> levels;
  int samples = 0;             // columns of all blocks of vectors the operator was applied to
                               // (level by level: besides the 8 probes of norm_estimate)
  double norm_estimate = 0;    // ||M||_F, from 8 random products (one sample set: from the samples)
  double seconds = 0;          // the whole construction
  double seconds_sampling = 0, seconds_ara = 0, seconds_update = 0, seconds_compress = 0;
};

// Members in this order, so designated initializers work in any subset.
template <class T = double>
struct hara_options {
  ::h2expr::structure<T> structure;  // empty: deduced from the operands
  int max_rank = 0;                  // the rank of any node's basis, before the final recompression
                                     // (0: 512); level by level: of a sampled block (0: min(its size, 512))
  int block_size = 32;               // samples per round, 1..64 (one sample set: the growth step)
  int converge_samples = 10;         // r: consecutive small samples that end a block (one sample set:
                                     // the held-out columns that measure each node's truncation)
  std::uint64_t seed = 0x853c49e6748fea9bull;
  bool verbose = false;              // a line per level on std::clog: samples, ranks, time
  hara_report* report = nullptr;     // filled when given
};

template <class T, class Space>
h2_matrix<T, Space> hara(const sampler<T, Space>& M, double tol, const hara_options<T>& o = {}) {
  detail::require<invalid_tolerance>(std::isfinite(tol) && tol > 0 && tol < 1,
                                     "hara: the tolerance must be in (0, 1), got " + std::to_string(tol));
  detail::require(o.max_rank >= 0, "hara_options: max_rank must be >= 0 (got " + std::to_string(o.max_rank) + ")");
  detail::require(o.block_size >= 1 && o.block_size <= 64,
                  "hara_options: block_size must be in 1..64 (got " + std::to_string(o.block_size) + ")");
  detail::require(o.converge_samples >= 1,
                  "hara_options: converge_samples must be >= 1 (got " + std::to_string(o.converge_samples) + ")");
  const ::h2expr::structure<T>& S = o.structure.empty() ? M.structure() : o.structure;
  detail::require<missing_structure>(!S.empty(),
                                     "hara: the operator carries no structure (a lambda sampler): pass "
                                     "hara_options::structure");
  detail::require<dimension_mismatch>(M.rows() == S.rows() && M.cols() == S.cols(),
                                      "hara: the operator is " + std::to_string(M.rows()) + " x " +
                                          std::to_string(M.cols()) + ", the structure " + std::to_string(S.rows()) +
                                          " x " + std::to_string(S.cols()));
  const auto t0 = std::chrono::steady_clock::now();
  const detail::hara_parameters par{tol, o.max_rank, o.block_size, o.converge_samples, o.seed};
  hara_report rep;
  h2_matrix<T, Space> P;
  auto build = [&](auto&& builder) {
    detail::h2_access::data(P) = builder.run(rep.levels, o.verbose ? &std::clog : nullptr);
    rep.norm_estimate = builder.norm_estimate();
  };
  auto near = detail::near_fields(S.blocks());
  if (S.depth() >= 1 && !near.empty())
    build(detail::one_sample_set_builder<T, Space>(M, S, par, std::move(near)));
  else build(detail::hara_builder<T, Space>(M, S, par));
  if (const auto* d = M.diagonal()) detail::add_diagonal(detail::h2_access::data(P), d->data());  // not sampled: exact
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& l : rep.levels) {
    rep.samples += l.samples;
    rep.seconds_sampling += l.seconds_sampling, rep.seconds_ara += l.seconds_ara;
    rep.seconds_update += l.seconds_update, rep.seconds_compress += l.seconds_compress;
  }
  if (o.verbose)
    std::clog << "hara: " << rep.samples << " samples, " << rep.seconds << " s, memory " << P.memory_bytes() / 1e6
              << " MB" << std::endl;
  if (o.report) *o.report = rep;
  return P;
}

// Any expression: an H2 matrix (rebuilt from its own products), sums, products, transposes, solves.
template <expression E>
  requires(!std::is_same_v<std::remove_cvref_t<E>,
                           sampler<typename std::remove_cvref_t<E>::value_type, typename std::remove_cvref_t<E>::space>>)
auto hara(E&& e, double tol, const hara_options<typename std::remove_cvref_t<E>::value_type>& o = {}) {
  return hara(as_sampler(std::forward<E>(e)), tol, o);
}

namespace detail {
// Both randomized estimates from one set of probes: max_i ||(P - M) x_i|| / ||M x_i|| (relative_error's),
// and sqrt(sum_i ||(P - M) x_i||^2 / sum_i ||M x_i||^2), an estimate of ||P - M||_F / ||M||_F.
struct probe_errors {
  double max_ratio = 0, frobenius = 0;
};
template <class T, class Space>
probe_errors probe(const sampler<T, Space>& P, const sampler<T, Space>& M, int probes, std::uint64_t seed) {
  require<dimension_mismatch>(P.rows() == M.rows() && P.cols() == M.cols(),
                              "relative_error: " + std::to_string(P.rows()) + " x " + std::to_string(P.cols()) +
                                  " vs " + std::to_string(M.rows()) + " x " + std::to_string(M.cols()));
  require(probes >= 1, "relative_error: probes must be >= 1");
  auto X = matrix<T, Space>::random(M.cols(), probes, seed, M.context_ptr());
  const auto Yp = to_dense(P * X), Ym = to_dense(M * X);
  probe_errors e;
  double diff2 = 0, ref2 = 0;
  for (int i = 0; i < probes; ++i) {
    const double ref = Ym.col(i).template cast<double>().norm();
    const double diff = (Yp.col(i).template cast<double>() - Ym.col(i).template cast<double>()).norm();
    e.max_ratio = std::max(e.max_ratio, ref > 0 ? diff / ref : diff);
    diff2 += diff * diff, ref2 += ref * ref;
  }
  e.frobenius = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return e;
}
}  // namespace detail

// sqrt(sum_i ||(P - M) x_i||^2 / sum_i ||M x_i||^2) over `probes` standard normal vectors x_i: a
// randomized estimate of ||P - M||_F / ||M||_F, the norm hara()'s tolerance is stated in. Sums, not the
// largest single ratio: a probe nearly orthogonal to M's dominant singular vectors makes ||M x_i||
// small, and the largest ratio then overstates the error many times; the sums concentrate (with 10
// probes, within a factor 3 of the true ratio but for odds near 2e-3, even when P - M and M have rank 1).
template <expression A, expression B>
double relative_error(A&& approx, B&& exact, int probes = 10, std::uint64_t seed = 0x2f6b1e3a9c4d5e87ull) {
  return detail::probe(as_sampler(std::forward<A>(approx)), as_sampler(std::forward<B>(exact)), probes, seed).frobenius;
}

// sqrt(sum_i ||M x_i||^2 / probes) over `probes` standard normal vectors x_i: a randomized estimate of
// ||M||_F (E ||M x||^2 = ||M||_F^2), concentrating as relative_error's sums do.
template <expression E>
double frobenius_estimate(E&& e, int probes = 10, std::uint64_t seed = 0x2f6b1e3a9c4d5e87ull) {
  using T = typename std::remove_cvref_t<E>::value_type;
  using Space = typename std::remove_cvref_t<E>::space;
  detail::require(probes >= 1, "frobenius_estimate: probes must be >= 1");
  const auto M = as_sampler(std::forward<E>(e));
  auto X = matrix<T, Space>::random(M.cols(), probes, seed, M.context_ptr());
  auto Y = matrix<T, Space>::uninitialized(M.rows(), probes, M.context_ptr());
  M.apply(X.view(), Y.view());
  const double f = std::sqrt(detail::sum_of_squares(Y.context(), Y.data(), std::size_t(Y.size())) / probes);
  detail::require<non_finite_value>(std::isfinite(f), "frobenius_estimate: the operator's products are not finite");
  return f;
}

}  // namespace h2expr
