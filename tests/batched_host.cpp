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
    const Eigen::MatrixXd spd = a.transpose() * a + Eigen::MatrixXd::Identity(n, n);
    Eigen::MatrixXd x;
    ASSERT_TRUE(reference::cholesky_solve(Eigen::SparseMatrix<double>(spd.sparseView()), b, x));
    EXPECT_LT((spd * x - b).norm(), 1e-12 * spd.norm() * (x.norm() + 1));
  }
}
}  // namespace h2expr::test
#endif
