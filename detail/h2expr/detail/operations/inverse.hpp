#pragma once
// inverse(op, tol): an H2 approximation X of op^{-1} by Newton-Schulz, every step one hara():
//
//   X_{k+1} = hara(2 X_k - X_k A X_k, tol_k)          (I - A X_{k+1} = (I - A X_k)^2, to tol_k)
//
//   auto A = hx::hara(K + 1e-2 * hx::identity<double>(n), 1e-8);
//   auto X = hx::inverse(A, 1e-2, {.verbose = true});   // then hx::cg(A, B, 1e-8, {}, X)
//
// op is any square expression with a structure (an H2 matrix, sums and products of them), which X
// takes. The start is X_0 = alpha I for a symmetric operator (X stays symmetric, so it preconditions
// CG), alpha = 1 / ||A||_2 (block Krylov): then ||I - A X_0||_2 < 1 for any positive definite A. Should
// the residual grow (a symmetric indefinite A), and for a general A, the start is X_0 = alpha A^T with
// alpha = 1 / ||A||_2^2, which converges for any non-singular A. The residual measured is
// r = ||I - A X||_F / sqrt(n) (10 fixed Gaussian probes); it stops when r <= tol. Each step's hara
// tolerance keeps what its error adds to the residual under min(0.05, 3.2 / sqrt(n), max(tol, z) / 4), z
// the exact step's residual: by the bound 2 ||A||_2 ||E||_F / sqrt(n) (from the estimates of ||A||_2 and
// ||X||_F) corrected by what the last steps' errors measurably added (the bound overstates it 10-100
// times on kernel matrices, and the ranks follow the tolerance). A step whose residual grows, or that
// lifts the top of A X's spectrum (seen by the probes as ||B^2 G|| / ||B G||, B = A X) above 1.5, is done
// again at the bound, ten times tighter. While r > 0.9 the steps are scaled, X_{k+1} = 2 beta X_k -
// beta^2 X_k A X_k with beta in [1, 2 / 1.1] from the probes (below; beta = 1 again after a rejected
// step): that saves a quarter to a third of the steps on kernel matrices. A last step where squaring
// the residual would not reach tol but cubing it would (both seen on the probes) is of order 3,
// X_{k+1} = X_k (3 I - A X_k (3 I - A X_k)): five products per sample instead of three, but one hara
// fewer, and the last ones are the dearest (the ranks grow as X nears A^{-1}).
//
// An operator that is singular, or too badly conditioned for T, raises numerical_failure naming the
// residual reached (a step needs a tolerance below what T resolves), as does max_iterations (steps,
// rejected ones included) without convergence; never a silent wrong inverse. A step whose hara would
// hold more samples than the memory available raises device_out_of_memory with the step and residual.
#include <h2expr/detail/core/splitmix.hpp>
#include <h2expr/detail/core/error.hpp>
#include <h2expr/detail/expressions/evaluate.hpp>
#include <h2expr/detail/expressions/expression.hpp>
#include <h2expr/detail/h2/compress.hpp>
#include <h2expr/detail/h2/h2_matrix.hpp>
#include <h2expr/detail/operands/diagonal_matrix.hpp>
#include <h2expr/detail/operations/hara.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace h2expr {

// What inverse() did, step by step (index 0: the start X_0).
struct inverse_report {
  int iterations = 0;             // Newton-Schulz steps (hara calls)
  std::vector<double> residual;   // ||I - A X_k||_F / sqrt(n), k = 0 .. iterations
  std::vector<double> tolerance;  // hara's tolerance of step k (0 for the start)
  std::vector<int> max_rank;      // the largest rank of X_k (0 for the start)
  std::vector<double> seconds;    // per step, its residual estimate included
  std::vector<hara_report> steps; // hara's report of each accepted step (index 0: step 1)
  std::vector<double> hara_error; // each accepted step's ||(I - A X_{k+1}) G - (I - beta A X_k)^order G|| / ||G||:
                                  // what its hara error added, the distance from the exact step (index 0: step 1)
  std::vector<double> scaling;    // each accepted step's beta (X_{k+1} = 2 beta X_k - beta^2 X_k A X_k; 1: plain)
  std::vector<int> order;         // each accepted step's order: 2 squares the residual, 3 cubes it (a last step
                                  // where squaring would not reach tol: X_k (3 I - 3 A X_k + (A X_k)^2))
  std::vector<double> top;        // ||B^2 G|| / ||B G||, B = A X_k: a lower estimate of B's largest eigenvalue
                                  // (k = 0 .. iterations; at most 1 for the exact steps)
  double norm_estimate = 0;       // ||A||_2
  bool transposed_start = false;  // X_0 = alpha A^T (else alpha I)
  int rejected = 0;               // steps done again at a tighter tolerance (their residual grew, or their top)
  int samples = 0;                // columns hara sampled over all steps
  double total_seconds = 0;
};

// Members in this order, so designated initializers work in any subset.
struct inverse_options {
  int max_iterations = 64;      // Newton-Schulz steps
  bool verbose = false;         // a line per step on std::clog: residual, scaling, hara tolerance and the
                                // error it added, max rank, time; and each rejected step
  inverse_report* report = nullptr;
  std::uint64_t seed = 0x6a09e667f3bcc908ull;
  int max_order = 3;            // 3: a last step may cube the residual (above); 2: squaring steps only
};

namespace detail {

template <class T, class Space>
h2_matrix<T, Space> newton_schulz(const sampler<T, Space>& A, double tol, const inverse_options& o) {
  using clock = std::chrono::steady_clock;
  const auto t_start = clock::now();
  require<invalid_tolerance>(std::isfinite(tol) && tol > 0 && tol < 1,
                             "inverse: the tolerance must be in (0, 1), got " + number(tol));
  require(o.max_iterations >= 1, "inverse_options: max_iterations must be >= 1 (got " +
                                      std::to_string(o.max_iterations) + ")");
  require(o.max_order == 2 || o.max_order == 3,
          "inverse_options: max_order must be 2 or 3 (got " + std::to_string(o.max_order) + ")");
  require<dimension_mismatch>(A.rows() == A.cols(), "inverse: the operator is " + shape(A) + ", not square");
  const auto& S = A.structure();
  require<missing_structure>(!S.empty(), "inverse: the operator carries no structure (a lambda sampler): give it one "
                                         "with sampler::with_structure");
  const index n = A.rows();
  const auto ctx = A.context_ptr();
  inverse_report rep;
  // ||A||_2: a lower bound within about 0.3%, so alpha ||A||_2 < 2 (the start converges) with room.
  const double norm = krylov_two_norm<T, Space>(
      ctx, n, n, [&](op t, const_view<T, Space> x, view<T, Space> y) {
        if (t == op::none) A.apply(x, y);
        else A.apply_transpose(x, y);
      },
      o.seed, 20, A.symmetric());
  rep.norm_estimate = norm;
  require<numerical_failure>(std::isfinite(norm) && norm > 0,
                             "inverse: the operator is zero or not finite (||A||_2 estimate " + number(norm) + ")");
  const auto I = identity<T, Space>(n, ctx);
  const int probes = 10;
  const std::uint64_t probe_seed = splitmix64(o.seed);
  // The residual is measured on fixed probes G: r = ||(I - A X) G||_F / ||G||_F estimates
  // ||I - A X||_F / sqrt(n), and nu = ||X||_F / sqrt(n) likewise.
  const auto G = matrix<T, Space>::random(n, probes, probe_seed, ctx);
  const std::size_t gsize = std::size_t(G.size());
  auto norm_of = [&](const matrix<T, Space>& V) { return std::sqrt(sum_of_squares(*ctx, V.data(), std::size_t(V.size()))); };
  const double g_norm = norm_of(G);
  auto product = [&](const auto& X, const_view<T, Space> V, view<T, Space> out) { as_sampler(A * X).apply(V, out); };
  auto per_row = [&](const auto& X) { return frobenius_estimate(X, probes, probe_seed) / std::sqrt(double(n)); };
  const double eps = double(std::numeric_limits<T>::epsilon());
  const double tol_floor = 10 * eps;  // hara resolves no finer in T: a step that needs it will not converge
  auto log = [&](int k, double r, double th, int rank, double sec) {
    rep.residual.push_back(r), rep.tolerance.push_back(th), rep.max_rank.push_back(rank), rep.seconds.push_back(sec);
    if (o.verbose) {
      std::clog << "inverse: step " << k << ", residual " << r;
      if (k > 0)
        std::clog << (rep.order.back() == 3 ? ", order 3" : "") << ", scaling " << rep.scaling.back() << ", hara tol "
                  << th << " (its error added " << rep.hara_error.back() << "), top " << rep.top.back();
      std::clog << ", max rank " << rank << ", " << sec << " s" << std::endl;
    }
  };
  // The error to throw (the report, when asked for, says how far it got).
  auto failure = [&](int k, double r, const std::string& why) {
    rep.iterations = int(rep.residual.size()) - 1;
    rep.total_seconds = std::chrono::duration<double>(clock::now() - t_start).count();
    if (o.report) *o.report = rep;
    return numerical_failure("inverse: " + why + " at step " + std::to_string(k) +
                             ", residual ||I - A X||_F / sqrt(n) = " + number(r) + " (tol " + number(tol) +
                             ")");
  };
  auto max_rank = [](const h2_matrix<T, Space>& X) {
    int m = 0;
    for (int k : X.ranks()) m = std::max(m, k);
    return m;
  };
  // What a step may add to the residual: a quarter of max(tol, z), z = ||(I - beta A X_k)^2 G|| / ||G||
  // the exact step's residual (measured before the step; no tolerance makes the step end below it, so
  // the error costs at most a quarter more than the exact step), but never above the cap (below), which
  // binds while r is near 1: there the residual falls by r (1 - r) a step, and an error that lifts one
  // converged component's |1 - lambda x| above 1 grows from then on (half of r^2, about 0.4 there, did
  // that). Its hara tolerance: from ||A E||_F <= ||A||_2 ||E||_F and ||X_{k+1}||_F <= 2 beta ||X_k||_F (||2 I - beta A X_k||_2 <= 2 while it converges) the bound th 2 beta ||A||_2 nu,
  // divided by its `slack`, and times `tighten`: a tenth after a rejected step, relaxed threefold (up to
  // 1) after an accepted one.
  //   The bound is off by orders of magnitude for the operators this is for: hara's error lies in its
  // blocks' trailing singular directions, oscillatory ones, which a smoothing kernel plus a nugget maps
  // with a gain near the nugget, not ||A||_2; yet its tolerance sets the ranks, so each step measures the
  // error its hara did add, e = ||(I - A X_{k+1}) G - (I - beta A X_k)^2 G|| / ||G|| (the exact step from
  // the same probes), and the next assumes 4 times the larger slack c = e / (th 2 beta ||A||_2 nu) of the
  // last two steps: never looser than ten times the last assumption, never tighter than the bound, and
  // back to the bound after a rejected step.
  //   The probes measure the error's Frobenius norm per row; what lifts a component is its spectral norm,
  // up to sqrt(n / m) times larger for an error in m directions, and hara's error is concentrated so (the
  // content of the kernel's smooth top that a step drops). The cap 0.05 held to n = 2^14 and let a
  // component past 1 at 2^16 (both with and without scaled steps): it is 3.2 / sqrt(n) from n = 2^12 on,
  // at most 0.2 on a component for an error in as few as 256 directions.
  const double cap = std::min(0.05, 3.2 / std::sqrt(double(n)));
  double tighten = 1, slack = 1, last_c = 1;
  // What a step of exact residual z may add (the target above).
  auto allowed = [&](double z) { return std::min(cap, 0.25 * std::max(tol, z)); };
  // gain: the bound on ||X_{k+1}||_F / ||X_k||_F, 2 beta for a scaled step, 3 for one of order 3
  // (||3 I - 3 B + B^2||_2 <= 3 for B's spectrum in [0, 1]).
  auto step_tolerance = [&](double r, double z, double nu, double gain, int k) {
    const double th = std::min(0.5, tighten * allowed(z) / (gain * norm * nu * slack));
    if (!(th >= tol_floor))
      throw failure(k, r, "the operator is singular or too badly conditioned for this precision (a step needs "
                          "hara tolerance " + number(th) + ")");
    return th;
  };
  // One step's hara: a rank cap reached at a tolerance the operator cannot be compressed to is the
  // inverse's failure (with its residual); out of memory stays device_out_of_memory, with the step and
  // residual named (and the report written); every other error passes unchanged.
  int tries = 0;
  hara_report last_hara;
  auto build = [&](auto&& expression, double th, int k, double r) {
    hara_report hr;
    try {
      auto Xn = hara(std::forward<decltype(expression)>(expression), th,
                     {.structure = S, .seed = o.seed + std::uint64_t(++tries), .report = &hr});
      rep.samples += hr.samples;
      last_hara = std::move(hr);
      return Xn;
    } catch (const rank_cap_reached& e) {
      throw failure(k, r, "hara could not build the step at tolerance " + number(th) + " (" + e.what() + ")");
    } catch (const device_out_of_memory& e) {  // still out of memory, now with the step and the residual reached
      throw device_out_of_memory(failure(k, r, std::string("out of memory in hara at tolerance ") + number(th) + " (" +
                                                   e.what() + ")").what());
    }
  };

  // The start X_0 and the steps. The first, X_1 = hara(2 X_0 - X_0 A X_0), is linear in A for
  // X_0 = alpha I. Newton-Schulz squares the residual: a step whose residual did not fall carries too
  // much of hara's error, and is done again from X_k, ten times tighter; where that fails too, X_k itself
  // is off, or A is singular (or, from alpha I, indefinite: then the start becomes alpha A^T).
  //   While r > 0.9 the steps are scaled (Pan and Schreiber's acceleration): X_{k+1} = 2 beta X_k - beta^2
  // X_k A X_k, exact residual (I - beta B)^2, B = A X_k with its spectrum in [0, M] (M <= 1 after a step,
  // about 1 at the start). The plain step (beta = 1) only doubles B's small eigenvalues; beta up to 2
  // moves them up to 4 times as fast at the price of pulling the top ones down, which pays while nearly
  // all of the residual is in the small ones: kernel matrices plus a nugget, whose spectrum crowds there,
  // spend their first 8-10 steps so (cheap in 2D, in 3D each costs hara's near-field sampling, about
  // 3,500 samples). beta minimizes the exact step's residual on the probes, ||G - 2 beta B G + beta^2 B^2
  // G||, a quartic from their inner products, over [1, 2 / (M + 0.1)]: the margin keeps beta B's top under
  // 2 (above it a component's residual grows without bound) against hara's errors. Scaling to the end
  // took 10 steps instead of 18 on a 2D Matern system but more time: its last steps needed higher ranks.
  h2_matrix<T, Space> X;
  bool transposed = !A.symmetric();
  T alpha = transposed ? T(1 / (norm * norm)) : T(1 / norm);
  double r = 0, nu = 0;
  // [G, B G, B^2 G] for B = A X_k (P) and for the step's candidate X_{k+1} (Pn, swapped in when accepted).
  auto P = matrix<T, Space>::uninitialized(n, 3 * probes, ctx), Pn = matrix<T, Space>::uninitialized(n, 3 * probes, ctx);
  auto Gram = matrix<T, Space>::uninitialized(3 * probes, 3 * probes, ctx);
  for (auto* M : {&P, &Pn})
    copy_2d(*ctx, std::size_t(n), std::size_t(probes), G.data(), std::size_t(n), M->data(), std::size_t(n));
  auto BG = [&](matrix<T, Space>& M) { return M.columns(probes, probes); };
  auto BBG = [&](matrix<T, Space>& M) { return M.columns(2 * probes, probes); };
  double top = 1;  // ||B^2 G|| / ||B G|| for X_k
  const double lifted = 1.5;  // a top above it is rejected (the next steps need it below 2, or 2 / beta)
  auto top_of = [&](matrix<T, Space>& M) {
    auto b = BG(M), bb = BBG(M);
    return std::sqrt(sum_of_squares(*ctx, bb.data(), gsize) / sum_of_squares(*ctx, b.data(), gsize));
  };
  // B V into out, for the start's expression or X_k.
  auto product_k = [&](int k, const_view<T, Space> V, view<T, Space> out) {
    if (k > 0) product(X, V, out);
    else if (transposed) product(alpha * transpose(A), V, out);
    else product(alpha * I, V, out);
  };
  auto restart = [&] {
    const auto t0 = clock::now();
    rep = inverse_report{.norm_estimate = norm, .transposed_start = transposed, .rejected = rep.rejected,
                         .samples = rep.samples};  // what the first start cost still counts
    tighten = 1, slack = 1, last_c = 1;
    product_k(0, G.view(), BG(P));
    product_k(0, BG(P), BBG(P));
    top = top_of(P);
    rep.top.push_back(top);
    auto W = matrix<T, Space>::uninitialized(n, probes, ctx);
    copy_2d(*ctx, std::size_t(n), std::size_t(probes), BG(P).data(), std::size_t(n), W.data(), std::size_t(n));
    axpy(*ctx, gsize, T(-1), G.data(), W.data());
    r = norm_of(W) / g_norm;
    nu = transposed ? per_row(alpha * transpose(A)) : double(alpha);
    log(0, r, 0, 0, std::chrono::duration<double>(clock::now() - t0).count());
  };
  // beta for step k + 1 (B^2 G in P): the minimizer of the quartic on a fine grid.
  auto choose_beta = [&](int k) {
    gemm_strided_batched(*ctx, op::transpose, op::none, 3 * probes, 3 * probes, int(n), T(1), P.data(), int(n), 0,
                         P.data(), int(n), 0, T(0), Gram.data(), 3 * probes, 0, 1);
    const Eigen::MatrixXd g = to_dense(Gram.view()).template cast<double>();
    auto dot = [&](int a, int b) { return g.block(a * probes, b * probes, probes, probes).trace(); };
    const double aa = dot(0, 0), ab = dot(0, 1), ac = dot(0, 2), bb = dot(1, 1), bc = dot(1, 2), cc = dot(2, 2);
    auto q = [&](double b) { return aa - 4 * b * ab + b * b * (2 * ac + 4 * bb) - 4 * b * b * b * bc + b * b * b * b * cc; };
    // M: at least 1 (the exact steps' bound), 1.01 at the start (alpha from a norm estimate within 0.3%,
    // 0.6% squared), and at least what the probes see.
    const double hi = 2 / (std::max(k > 0 ? 1.0 : 1.01, top) + 0.1);
    double best = 1, q_best = q(1);
    for (int i = 1; i <= 1000; ++i)
      if (const double b = 1 + (hi - 1) * i / 1000, v = q(b); v < q_best) best = b, q_best = v;
    return best;
  };
  restart();
  int k = 0, rejected_in_a_row = 0;
  while (!(r <= tol)) {
    if (!std::isfinite(r)) throw failure(k, r, "the residual is not finite");
    if (k + rep.rejected >= o.max_iterations)
      throw failure(k, r, "no convergence in max_iterations = " + std::to_string(o.max_iterations));
    const auto t0 = clock::now();
    // Z = (I - beta B)^2 G = G - 2 beta B G + beta^2 B^2 G: the exact step's residual on the probes.
    // After a rejected step the plain one: a scaled step that failed would fail again at any tolerance
    // where the norm estimate, not hara, put beta B's top past 2.
    const double beta = r > 0.9 && rejected_in_a_row == 0 ? choose_beta(k) : 1.0;
    auto Z = matrix<T, Space>::uninitialized(n, probes, ctx);
    copy_2d(*ctx, std::size_t(n), std::size_t(probes), G.data(), std::size_t(n), Z.data(), std::size_t(n));
    axpy(*ctx, gsize, T(-2 * beta), BG(P).data(), Z.data());
    axpy(*ctx, gsize, T(beta * beta), BBG(P).data(), Z.data());
    double z = norm_of(Z) / g_norm;
    // Order 3 where it, and not the square, ends the iteration: Z becomes (I - B)^3 G = Z - B Z. The
    // square is taken where it ends it with half the error allowed (hara's measured errors are a fifth
    // to a tenth of it), the cube only where even all of it does: a cubed step costs a fifth to a
    // half more than a squared one, one that misses tol another step.
    int order = 2;
    if (o.max_order == 3 && k > 0 && beta == 1 && z + allowed(z) / 2 > tol) {
      auto BZ = matrix<T, Space>::uninitialized(n, probes, ctx);
      product(X, Z.view(), BZ.view());
      axpy(*ctx, gsize, T(-1), BZ.data(), Z.data());
      const double z3 = norm_of(Z) / g_norm;
      if (z3 + allowed(z3) <= tol) order = 3, z = z3;
      else axpy(*ctx, gsize, T(1), BZ.data(), Z.data());  // back to the square's
    }
    const double gain = order == 3 ? 3.0 : 2 * beta;
    const double th = step_tolerance(r, z, nu, gain, k + 1);
    const T b1 = T(2 * beta), b2 = T(beta * beta);
    h2_matrix<T, Space> next;
    if (order == 3) {
      auto cubic = X * (T(3) * I - A * X * (T(3) * I - A * X));
      if (transposed) next = build(std::move(cubic), th, k + 1, r);
      else next = build(as_sampler(std::move(cubic)).assume_symmetric(), th, k + 1, r);  // as X and A are
    } else if (k > 0) next = build(b1 * X - b2 * (X * A * X), th, k + 1, r);
    else if (!transposed) next = build((b1 * alpha) * I - (b2 * alpha * alpha) * A, th, 1, r);
    else next = build((b1 * alpha) * transpose(A) - (b2 * alpha * alpha) * (transpose(A) * A * transpose(A)), th, 1, r);
    // The candidate's B G = A X_{k+1} G and B^2 G (the next step's, unless rejected). -(I - A X_{k+1}) G =
    // B G - G, and what hara's error added: its distance from Z; the top of its spectrum seen by the probes.
    product(next, G.view(), BG(Pn));
    auto Wn = matrix<T, Space>::uninitialized(n, probes, ctx);
    copy_2d(*ctx, std::size_t(n), std::size_t(probes), BG(Pn).data(), std::size_t(n), Wn.data(), std::size_t(n));
    axpy(*ctx, gsize, T(-1), G.data(), Wn.data());
    const double rn = norm_of(Wn) / g_norm;
    axpy(*ctx, gsize, T(1), Wn.data(), Z.data());
    const double e = norm_of(Z) / g_norm, c = e / (th * gain * norm * nu);  // hara's share, the bound's slack
    product(next, BG(Pn), BBG(Pn));
    const double top_n = top_of(Pn);
    // A step is rejected when its residual did not fall, or when hara's error lifted the top of A X_{k+1}'s
    // spectrum (at most 1 for the exact step) to where the next step would carry it past 2: the probes'
    // Frobenius measure of the error can miss it on large n (an error in a few smooth directions; dropped
    // content of a scaled step, where 2 beta - beta^2 cancels to 0.36 at the top, lifts it to 3.6).
    if (!(rn < r) || !(top_n <= lifted)) {
      ++rep.rejected, ++rejected_in_a_row, tighten *= 0.1, slack = 1, last_c = 1;
      if (o.verbose)
        std::clog << "inverse: step " << k + 1 << " rejected (residual " << rn << ", top " << top_n
                  << " at hara tol " << th << ")" << std::endl;
      if (rejected_in_a_row < 2) continue;
      if (k == 0 && !transposed) {  // from alpha I at any tolerance: A is not positive definite
        transposed = true, rejected_in_a_row = 0;
        alpha = T(1 / (norm * norm));
        restart();
        continue;
      }
      throw failure(k + 1, rn, !(rn < r) ? "the residual grows at every tolerance (a singular operator?)"
                                         : "hara's error lifts the top of A X's spectrum to " + number(top_n) +
                                               " at every tolerance (a component would grow)");
    }
    rejected_in_a_row = 0, tighten = std::min(1.0, 3 * tighten);
    if (std::isfinite(c)) slack = std::clamp(4 * std::max(c, last_c), slack / 10, 1.0), last_c = c;
    ++k;
    rep.hara_error.push_back(e), rep.scaling.push_back(beta), rep.order.push_back(order), rep.top.push_back(top_n);
    log(k, rn, th, max_rank(next), std::chrono::duration<double>(clock::now() - t0).count());
    rep.steps.push_back(std::move(last_hara));
    X = std::move(next);
    r = rn, top = top_n;
    std::swap(P, Pn);
    nu = per_row(X);
  }
  rep.iterations = k;
  rep.total_seconds = std::chrono::duration<double>(clock::now() - t_start).count();
  if (o.report) *o.report = rep;
  return X;
}

}  // namespace detail

// An H2 approximation of op^{-1} with ||I - op X||_F / sqrt(n) <= tol (estimated), on op's structure.
// As CG's preconditioner a loose one pays soonest (its first steps are at low ranks): inverse(., 0.99) of
// a 2D Matern system broke even with plain CG after 1.3 right-hand sides at n = 2^16, inverse(., 0.2)
// after 11.1; for fewer iterations without building more, precondition with 2 X - X op X (README).
template <expression E>
auto inverse(E&& op, double tol, const inverse_options& o = {}) {
  return detail::newton_schulz(as_sampler(std::forward<E>(op)), tol, o);
}

}  // namespace h2expr
