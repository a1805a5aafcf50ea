// The batched suite on the host space, for the scalar type this object is built for (CMakeLists.txt
// compiles it once per type).
#include "batched_tests.hpp"

#include <utility>
#include <vector>

namespace h2expr::test {
H2EXPR_TYPED_SUITE(batched_test, host);
}  // namespace h2expr::test

#ifdef H2EXPR_TEST_SCALAR_IS_DOUBLE  // once per executable
// The tests' own references (reference.cpp) against plain Eigen: in BLAS and LAPACK where the build has
// OpenBLAS (the README's build), in Eigen where it has not (CI's Eigen-fallback stage runs this suite).
// (In the sanitizer build with OpenBLAS, the tests' Eigen products call BLAS too: EIGEN_USE_BLAS; there
// this checks the references' own calls, and the Eigen-fallback stage checks them against Eigen's kernels.)
namespace h2expr::test {
TEST(reference, agrees_with_plain_eigen) {
  rng r(97);
  for (auto [m, n] : std::vector<std::pair<int, int>>{{1, 1}, {40, 17}, {17, 40}, {230, 120}, {300, 0}}) {
    const Eigen::MatrixXd a = r.normal<double>(m, n), b = r.normal<double>(n, 9), c = r.normal<double>(m, 9);
    const double scale = a.norm() * b.norm() + a.norm() * c.norm() + 1;
    EXPECT_LT((reference::product(a, false, b, false) - a * b).norm(), 1e-14 * scale);
    EXPECT_LT((reference::product(a, true, c, false) - a.transpose() * c).norm(), 1e-14 * scale);
    EXPECT_LT((reference::product(b, true, a, true) - b.transpose() * a.transpose()).norm(), 1e-14 * scale);
    if (n == 0) {  // empty: products of zeros, norm 0 (Eigen's SVDs reject empty matrices)
      EXPECT_EQ(reference::two_norm(a), 0.0);
      continue;
    }
    EXPECT_NEAR(reference::two_norm(a), reference::singular_values(a)(0), 1e-12 * a.norm()) << m << " x " << n;
    if (m >= n) {
      const Eigen::MatrixXd q = reference::orthonormal_columns(a);
      ASSERT_EQ(q.rows(), m);
      ASSERT_EQ(q.cols(), n);
      EXPECT_LT((q.transpose() * q - Eigen::MatrixXd::Identity(n, n)).norm(), 1e-13);
      EXPECT_LT((q * (q.transpose() * a) - a).norm(), 1e-12 * a.norm());  // spans a's columns
    }
    const Eigen::MatrixXf af = a.cast<float>();
    const double e = (a - 2 * a).norm() / a.norm(), ef = (af.cast<double>() - a).norm() / a.norm();
    EXPECT_NEAR(relative_error(2 * a, a), 1.0, 1e-13);
    EXPECT_EQ((reference::relative_error<double, double>(a, a)), 0.0);
    EXPECT_NEAR((reference::relative_error<double, double>(a - a, a)), 1.0, 1e-13);
    EXPECT_NEAR((reference::relative_error<double, double>(2 * a, a)), e, 1e-13);
    EXPECT_NEAR((reference::relative_error<float, double>(af, a)), ef, 1e-13);
    EXPECT_GT(ef, 0.0);
    const double ed = (a - af.cast<double>()).norm() / af.cast<double>().norm();
    EXPECT_NEAR((reference::relative_error<double, float>(a, af)), ed, 1e-13);
    EXPECT_EQ((reference::relative_error<float, float>(af, af)), 0.0);
    EXPECT_NEAR(relative_error(a, Eigen::MatrixXd::Zero(m, n)), a.norm(), 1e-14 * a.norm());  // exact 0: absolute
    std::mt19937_64 e1(5), e2(5);
    std::normal_distribution<double> d;
    Eigen::VectorXd z(7);
    reference::fill_normal(e1, z.data(), 7);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(z(i), d(e2));  // the same numbers, in order
    const Eigen::MatrixXd spd = a.transpose() * a + Eigen::MatrixXd::Identity(n, n);
    Eigen::MatrixXd x;
    ASSERT_TRUE(reference::cholesky_solve(Eigen::SparseMatrix<double>(spd.sparseView()), b, x));
    EXPECT_LT((spd * x - b).norm(), 1e-12 * spd.norm() * (x.norm() + 1));
  }
}
}  // namespace h2expr::test
#endif
