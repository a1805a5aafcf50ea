#pragma once
// Test helpers: the (scalar, space) configurations, dense references, and tolerances.
#include <gtest/gtest.h>
#include <h2expr/context.hpp>
#include <h2expr/detail/primitives/batched.hpp>
#include <h2expr/kernels.hpp>
#include <h2expr/matrix.hpp>
#include <h2expr/sampler.hpp>

#include <Eigen/Dense>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>

#include "reference.hpp"

namespace h2expr::test {

template <class T, class S>
struct config {
  using scalar = T;
  using space = S;
};

template <class T>
using dense = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;

// Fresh inputs on every run (the seed is printed so a failure can be replayed with H2EXPR_TEST_SEED).
inline std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    if (const char* s = std::getenv("H2EXPR_TEST_SEED")) return std::uint64_t(std::stoull(s));
    const auto fresh = std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    std::fprintf(stderr, "H2EXPR_TEST_SEED=%llu\n", static_cast<unsigned long long>(fresh));  // to replay a failure
    return fresh;
  }();
  return seed;
}

struct rng {
  std::mt19937_64 engine;
  explicit rng(std::uint64_t salt = 0) : engine(test_seed() ^ (salt * 0x9e3779b97f4a7c15ull)) {}
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(engine); }
  template <class T>
  dense<T> normal(Eigen::Index rows, Eigen::Index cols) {  // column by column
    dense<T> m(rows, cols);
    reference::fill_normal(engine, m.data(), std::size_t(m.size()));
    return m;
  }
};

// Unit roundoff times a safety factor: the accuracy a backward-stable routine reaches at small sizes.
template <class T>
double tol(double factor = 1.0) {
  return factor * (std::is_same_v<T, float> ? 2e-5 : 1e-12);
}

// ||approx - exact||_F / ||exact||_F in double (reference.cpp). Expressions are evaluated once, here,
// in their own scalar type: as a product expression, `exact` evaluated twice was half of a test's time
// under the sanitizers.
template <class A, class B>
double relative_error(const A& approx, const B& exact) {
  using TA = typename A::Scalar;
  using TB = typename B::Scalar;
  static_assert((std::is_same_v<TA, float> || std::is_same_v<TA, double>) &&
                    (std::is_same_v<TB, float> || std::is_same_v<TB, double>),
                "relative_error: float or double matrices (reference.cpp's instances)");
  const Eigen::Ref<const dense<TA>> a(approx);
  const Eigen::Ref<const dense<TB>> e(exact);
  return reference::relative_error<TA, TB>(a, e);
}

// A non-symmetric kernel, as a plain host lambda (on the CUDA space: evaluated on the host).
inline auto skewed_kernel(double length = 0.3) {
  return [length](const auto& x, const auto& y) {
    using T = std::decay_t<decltype(x[0])>;
    return std::exp(-detail::distance(x, y) / T(length)) * (T(1.5) + std::tanh(T(2) * (x[0] - y[0])));
  };
}

// A sampler over a dense host matrix, as a user would write one (M X by one gemm in the space):
// one function (symmetric) or two (general).
template <class T, class Space>
sampler<T, Space> dense_sampler(const dense<T>& M, bool symmetric, const context_ptr<Space>& ctx) {
  auto Md = std::make_shared<matrix<T, Space>>(M, ctx);
  auto product = [Md](bool transpose) {
    return [Md, transpose](const_view<T, Space> in, view<T, Space> out) {
      detail::gemm_strided_batched(Md->context(), transpose ? detail::op::transpose : detail::op::none,
                                   detail::op::none, int(out.rows()), int(in.cols()), int(in.rows()), T(1), Md->data(),
                                   int(Md->rows()), 0, in.data(), int(in.ld()), 0, T(0), out.data(), int(out.ld()), 0, 1);
    };
  };
  if (symmetric) return sampler<T, Space>(M.rows(), product(false), ctx);
  return sampler<T, Space>(M.rows(), M.cols(), product(false), product(true), ctx);
}

// A context's memory limit (memory_available's bound, either space) for a scope, lifted on the way out,
// a failed check's exception included, so that later tests on the same context do not inherit it.
template <class Context>
class scoped_memory_limit {
 public:
  scoped_memory_limit(Context& c, std::size_t bytes) : c_(c) { c_.set_memory_limit(bytes); }
  ~scoped_memory_limit() { c_.set_memory_limit(0); }
  scoped_memory_limit(const scoped_memory_limit&) = delete;
  scoped_memory_limit& operator=(const scoped_memory_limit&) = delete;

 private:
  Context& c_;
};

// Skips the current test when the space cannot run here (the CUDA space without a device).
template <class Space>
bool space_unavailable() {
  if constexpr (std::is_same_v<Space, host>) return false;
  else return !cuda_available();
}

}  // namespace h2expr::test

// A typed suite instantiated for one (scalar, space): the build compiles each suite once per scalar
// type, in its own translation unit (H2EXPR_TEST_SCALAR), so that no compile holds both. Its tests are
// named <space>_<scalar>/..., e.g. host_double/; the indirections expand the scalar before pasting.
#define H2EXPR_TYPED_SUITE_AS(prefix, suite) INSTANTIATE_TYPED_TEST_SUITE_P(prefix, suite, configs)
#define H2EXPR_TYPED_SUITE_PASTE(space, scalar, suite) H2EXPR_TYPED_SUITE_AS(space##_##scalar, suite)
#define H2EXPR_TYPED_SUITE_NAMED(space, scalar, suite) H2EXPR_TYPED_SUITE_PASTE(space, scalar, suite)
#define H2EXPR_TYPED_SUITE(suite, space)                                \
  using configs = ::testing::Types<config<H2EXPR_TEST_SCALAR, ::h2expr::space>>; \
  H2EXPR_TYPED_SUITE_NAMED(space, H2EXPR_TEST_SCALAR, suite)

#define H2EXPR_SKIP_IF_UNAVAILABLE(Space)                                                  \
  do {                                                                                     \
    if (::h2expr::test::space_unavailable<Space>()) GTEST_SKIP() << "no CUDA device here"; \
  } while (0)

namespace h2expr::test {

// Base of the typed suites: the (scalar, space) of the configuration and a context in it; skips
// where the space cannot run.
template <class C>
class space_test : public ::testing::Test {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  void SetUp() override {
    H2EXPR_SKIP_IF_UNAVAILABLE(Space);
    ctx_ = default_context<Space>();
  }
  context_ptr<Space> ctx_;
};

}  // namespace h2expr::test

namespace h2expr::test {

// Writes a host matrix into a block of a space (same size).
template <class T, class Space>
void upload(view<T, Space> dst, const dense<T>& src) {
  ASSERT_EQ(dst.rows(), src.rows());
  ASSERT_EQ(dst.cols(), src.cols());
  if (src.size()) detail::upload_2d(*dst.context(), src.rows(), src.cols(), src.data(), src.rows(), dst.data(), dst.ld());
}

}  // namespace h2expr::test
