#include "core/nn/gradient_check.h"

#include <cmath>

#include "Eigen/Core"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

// f(x) = sum_i x_i^2 sin(x_i), f'(x_i) = 2 x_i sin(x_i) + x_i^2 cos(x_i).
double Function(const Eigen::VectorXd& x) {
  return (x.array().square() * x.array().sin()).sum();
}
Eigen::VectorXd Derivative(const Eigen::VectorXd& x) {
  return (2.0 * x.array() * x.array().sin() + x.array().square() * x.array().cos()).matrix();
}

TEST(GradientCheckTest, CentralDifferencesMatchKnownDerivative) {
  Eigen::VectorXd x(4);
  x << 0.3, -1.2, 2.5, 0.05;
  const Eigen::VectorXd numeric = NumericalGradient(Function, x, 1e-5);
  EXPECT_LT((numeric - Derivative(x)).lpNorm<Eigen::Infinity>(), 1e-9);
  const GradientCheckResult result = CheckGradient(Function, x, Derivative(x));
  EXPECT_LT(result.max_relative_error, 1e-7);
  EXPECT_LT(result.norm_relative_error, 1e-7);
}

// Where the true gradient is 0 the error is absolute, scaled by the floor:
// at x = 0 the central difference is (2 h^2 sin h) / (2h) ~ h^2 = 1e-10, so
// the relative error is 1e-10 / 1e-6 = 1e-4.
TEST(GradientCheckTest, ZeroGradientIsJudgedAgainstTheFloor) {
  Eigen::VectorXd x(2);
  x << 0.3, 0.0;
  const GradientCheckResult result = CheckGradient(Function, x, Derivative(x));
  EXPECT_EQ(result.worst_index, 1);
  EXPECT_NEAR(result.max_relative_error, 1e-4, 1e-6);
  GradientCheckOptions looser;
  looser.denominator_floor = 1e-3;
  EXPECT_NEAR(CheckGradient(Function, x, Derivative(x), looser).max_relative_error, 1e-7,
              1e-9);
}

TEST(GradientCheckTest, FlagsAWrongCoordinate) {
  Eigen::VectorXd x(3);
  x << 0.7, 1.1, -0.4;
  Eigen::VectorXd wrong = Derivative(x);
  wrong(1) *= 1.01;  // a 1% error in one coordinate
  const GradientCheckResult result = CheckGradient(Function, x, wrong);
  EXPECT_EQ(result.worst_index, 1);
  EXPECT_NEAR(result.max_relative_error, 0.01 / 1.01, 1e-6);
  EXPECT_EQ(result.analytic_at_worst, wrong(1));
}

TEST(GradientCheckTest, NanOrMisshapenGradientIsInfinitelyWrong) {
  Eigen::VectorXd x(2);
  x << 0.5, 0.25;
  Eigen::VectorXd with_nan = Derivative(x);
  with_nan(0) = NAN;
  EXPECT_TRUE(std::isinf(CheckGradient(Function, x, with_nan).max_relative_error));
  EXPECT_TRUE(
      std::isinf(CheckGradient(Function, x, Eigen::VectorXd::Zero(3)).max_relative_error));
}

}  // namespace
}  // namespace dpcurator::nn
