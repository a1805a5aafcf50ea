// The error hierarchy: every failure is an h2expr::error, and the kinds are distinguishable.
#include <gtest/gtest.h>
#include <h2expr/context.hpp>
#include <h2expr/error.hpp>
#include <h2expr/matrix.hpp>

namespace hx = h2expr;

TEST(errors, every_kind_is_an_h2expr_error) {
  EXPECT_THROW(throw hx::dimension_mismatch("x"), hx::error);
  EXPECT_THROW(throw hx::invalid_tolerance("x"), hx::invalid_argument);
  EXPECT_THROW(throw hx::cublas_error("x"), hx::cuda_error);
  EXPECT_THROW(throw hx::device_out_of_memory("x"), hx::error);
  EXPECT_THROW(throw hx::file_error("x"), hx::error);
  EXPECT_THROW(throw hx::no_cuda_device("x"), std::runtime_error);
}

TEST(errors, messages_say_what_went_wrong) {
  try {
    hx::matrix<double> m(4, 4);
    (void)m.block(2, 2, 3, 3);
    FAIL() << "no exception";
  } catch (const hx::dimension_mismatch& e) {
    EXPECT_NE(std::string(e.what()).find("outside a 4 x 4 matrix"), std::string::npos) << e.what();
  }
}

TEST(errors, host_space_needs_no_gpu) {
  // A host-only program (no translation unit that can use the CUDA space) never touches CUDA.
  EXPECT_FALSE(hx::cuda_available());
  hx::matrix<float> m = hx::matrix<float>::random(3, 3, 1);
  EXPECT_EQ(m.rows(), 3);
}
