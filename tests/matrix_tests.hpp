#pragma once
// matrix, view and to_dense, written once for every (scalar, space); instantiated per space.
#include "instances/primitives.hpp"
#include "support.hpp"

namespace h2expr::test {

template <class C>
class matrix_test : public ::testing::Test {
 protected:
  using T = typename C::scalar;
  using Space = typename C::space;
  void SetUp() override { H2EXPR_SKIP_IF_UNAVAILABLE(Space); }
};
TYPED_TEST_SUITE_P(matrix_test);

TYPED_TEST_P(matrix_test, zeros_and_sizes) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  matrix<T, Space> m(7, 5);
  EXPECT_EQ(m.rows(), 7);
  EXPECT_EQ(m.cols(), 5);
  EXPECT_EQ(m.ld(), 7);
  EXPECT_EQ(to_dense(m), dense<T>::Zero(7, 5));
  matrix<T, Space> empty(0, 3);
  EXPECT_EQ(to_dense(empty).size(), 0);
  EXPECT_THROW((matrix<T, Space>(-1, 3)), invalid_argument);
}

TYPED_TEST_P(matrix_test, eigen_round_trip_and_deep_copy) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(1);
  const dense<T> a = r.template normal<T>(13, 9), b = r.template normal<T>(4, 4);
  matrix<T, Space> m(a);
  EXPECT_EQ(to_dense(m), a);
  matrix<T, Space> copy = m;  // deep: survives reassignment of the original
  m = matrix<T, Space>(b);
  EXPECT_EQ(to_dense(copy), a);
  EXPECT_EQ(to_dense(m), b);
  matrix<T, Space> moved = std::move(copy);
  EXPECT_EQ(to_dense(moved), a);
  EXPECT_EQ(copy.rows(), 0);
  // From an Eigen expression, converted to T.
  matrix<T, Space> expr(2.0 * a.template cast<double>().transpose());
  EXPECT_EQ(to_dense(expr), (T(2) * a.transpose()).eval());
}

TYPED_TEST_P(matrix_test, views_and_blocks) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  rng r(2);
  const dense<T> a = r.template normal<T>(11, 8);
  matrix<T, Space> m(a);
  auto v = m.block(2, 3, 5, 4);
  EXPECT_EQ(v.ld(), 11);
  EXPECT_EQ(to_dense(v), a.block(2, 3, 5, 4));
  EXPECT_EQ(to_dense(v.block(1, 1, 2, 2)), a.block(3, 4, 2, 2));
  EXPECT_EQ(to_dense(m.columns(6, 2)), a.middleCols(6, 2));
  matrix<T, Space> owned{const_view<T, Space>(v)};  // deep copy of a strided block
  EXPECT_EQ(owned.ld(), 5);
  EXPECT_EQ(to_dense(owned), a.block(2, 3, 5, 4));
  EXPECT_THROW(m.block(8, 0, 4, 1), dimension_mismatch);
  EXPECT_THROW(m.block(0, -1, 1, 1), dimension_mismatch);
  EXPECT_THROW(v.block(0, 0, 6, 1), dimension_mismatch);
}

TYPED_TEST_P(matrix_test, random_is_reproducible_and_distributed) {
  using T = typename TypeParam::scalar;
  using Space = typename TypeParam::space;
  const std::uint64_t seed = test_seed();
  const dense<T> x = to_dense(matrix<T, Space>::random(301, 67, seed));
  EXPECT_EQ(x, to_dense(matrix<T, Space>::random(301, 67, seed)));
  const dense<T> y = to_dense(matrix<T, Space>::random(301, 67, seed + 1));
  EXPECT_GT((x - y).norm(), 1.0);
  // 20,167 standard normal draws: mean within 5 sigma of 0, variance within 0.05 of 1.
  const double n = double(x.size()), mean = x.template cast<double>().sum() / n;
  const double var = (x.template cast<double>().array() - mean).square().sum() / (n - 1);
  EXPECT_LT(std::abs(mean), 5.0 / std::sqrt(n));
  EXPECT_NEAR(var, 1.0, 0.05);
  // Columns are not copies of each other (each column has its own stream).
  EXPECT_GT((x.col(0) - x.col(1)).norm(), 1.0);
  const dense<T> u = to_dense(matrix<T, Space>::uniform(1000, 7, seed));
  EXPECT_GE(u.minCoeff(), T(0));
  EXPECT_LT(u.maxCoeff(), T(1));
  EXPECT_NEAR(u.template cast<double>().mean(), 0.5, 0.02);
}

REGISTER_TYPED_TEST_SUITE_P(matrix_test, zeros_and_sizes, eigen_round_trip_and_deep_copy, views_and_blocks,
                            random_is_reproducible_and_distributed);

}  // namespace h2expr::test
