#include "core/nn/gemm.h"

#include <limits>

#include "Eigen/Core"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

// Every transpose combination, on blocks with outer strides (the row shards
// and column slices the trainers pass), against Eigen's product in double.
TEST(GemmTest, FloatMatchesEigenForEveryTransposeAndStride) {
  const Eigen::MatrixXf big_a = Eigen::MatrixXf::Random(40, 50);
  const Eigen::MatrixXf big_b = Eigen::MatrixXf::Random(45, 40);
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      // op(A) is 7 x 9, op(B) is 9 x 5.
      const Eigen::MatrixXf a =
          ta ? big_a.block(3, 2, 9, 7).eval() : big_a.block(3, 2, 7, 9).eval();
      const Eigen::MatrixXf b =
          tb ? big_b.block(1, 4, 5, 9).eval() : big_b.block(1, 4, 9, 5).eval();
      const auto a_view = ta ? big_a.block(3, 2, 9, 7) : big_a.block(3, 2, 7, 9);
      const auto b_view = tb ? big_b.block(1, 4, 5, 9) : big_b.block(1, 4, 9, 5);
      const Eigen::MatrixXd op_a = ta ? a.cast<double>().transpose().eval() : a.cast<double>();
      const Eigen::MatrixXd op_b = tb ? b.cast<double>().transpose().eval() : b.cast<double>();
      Eigen::MatrixXf out = Eigen::MatrixXf::Constant(20, 8, 1.0f);
      auto c = out.block(2, 1, 7, 5);
      Gemm(ta, a_view, tb, b_view, 0.0f, c);
      EXPECT_LT((c.cast<double>() - op_a * op_b).cwiseAbs().maxCoeff(), 1e-5)
          << "ta=" << ta << " tb=" << tb;
      // beta = 1 accumulates; entries outside the block are untouched.
      Gemm(ta, a_view, tb, b_view, 1.0f, c);
      EXPECT_LT((c.cast<double>() - 2.0 * op_a * op_b).cwiseAbs().maxCoeff(), 1e-5);
      EXPECT_EQ(out(0, 0), 1.0f);
      EXPECT_EQ(out(19, 7), 1.0f);
    }
  }
}

// An empty inner dimension gives exactly 0 with beta = 0, even over NaN.
TEST(GemmTest, EmptyInnerDimensionClearsWithBetaZero) {
  const Eigen::MatrixXf a(3, 0), b(0, 4);
  Eigen::MatrixXf c = Eigen::MatrixXf::Constant(3, 4, std::numeric_limits<float>::quiet_NaN());
  Gemm(false, a, false, b, 0.0f, c);
  EXPECT_TRUE((c.array() == 0.0f).all());
}

// Issue 39: double goes to cblas_dgemm too. Every transpose combination on
// strided blocks, beta 0 over NaN, 1 and 0.5, against a plain triple loop.
TEST(GemmTest, DoubleMatchesALoopForEveryTransposeStrideAndBeta) {
  const Eigen::MatrixXd big_a = Eigen::MatrixXd::Random(40, 50);
  const Eigen::MatrixXd big_b = Eigen::MatrixXd::Random(45, 40);
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      // op(A) is 7 x 9, op(B) is 9 x 5.
      const auto a_view = ta ? big_a.block(3, 2, 9, 7) : big_a.block(3, 2, 7, 9);
      const auto b_view = tb ? big_b.block(1, 4, 5, 9) : big_b.block(1, 4, 9, 5);
      Eigen::MatrixXd product(7, 5);
      for (int i = 0; i < 7; ++i) {
        for (int j = 0; j < 5; ++j) {
          double total = 0.0;
          for (int k = 0; k < 9; ++k) {
            total += (ta ? a_view(k, i) : a_view(i, k)) * (tb ? b_view(j, k) : b_view(k, j));
          }
          product(i, j) = total;
        }
      }
      Eigen::MatrixXd out = Eigen::MatrixXd::Constant(20, 8, 1.0);
      auto c = out.block(2, 1, 7, 5);
      c.setConstant(std::numeric_limits<double>::quiet_NaN());
      Gemm(ta, a_view, tb, b_view, 0.0, c);
      EXPECT_LT((c - product).cwiseAbs().maxCoeff(), 1e-13) << "ta=" << ta << " tb=" << tb;
      Gemm(ta, a_view, tb, b_view, 1.0, c);
      EXPECT_LT((c - 2.0 * product).cwiseAbs().maxCoeff(), 1e-13);
      Gemm(ta, a_view, tb, b_view, 0.5, c);
      EXPECT_LT((c - 2.0 * product).cwiseAbs().maxCoeff(), 1e-13);
      EXPECT_EQ(out(0, 0), 1.0);
      EXPECT_EQ(out(19, 7), 1.0);
      EXPECT_EQ(out(9, 1), 1.0);  // just below the block
    }
  }
}

TEST(GemmTest, DoubleMatchesEigen) {
  const Eigen::MatrixXd a = Eigen::MatrixXd::Random(6, 4), b = Eigen::MatrixXd::Random(6, 3);
  Eigen::MatrixXd c(4, 3);
  Gemm(true, a, false, b, 0.0, c);
  EXPECT_LT((c - a.transpose() * b).cwiseAbs().maxCoeff(), 1e-14);
}

}  // namespace
}  // namespace dpcurator::nn
