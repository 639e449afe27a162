#include "core/nn/adam.h"

#include <cmath>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::nn {
namespace {

using ::testing::HasSubstr;

// Scalar trajectory for g = 2, -1, 0.5 from theta = 1 with lr 0.1 and the
// default betas, computed independently (Python, Algorithm 1 of Kingma & Ba).
TEST(AdamTest, MatchesAlgorithmOneReferenceValues) {
  AdamOptions options;
  options.learning_rate = 0.1;
  absl::StatusOr<Adam> adam = Adam::Create(1, options);
  ASSERT_TRUE(adam.ok()) << adam.status();
  Eigen::VectorXd theta(1);
  theta << 1.0;
  const double grads[] = {2.0, -1.0, 0.5};
  const double expected[] = {0.9000000005, 0.8733662967024315, 0.8393233821389426};
  for (int t = 0; t < 3; ++t) {
    ASSERT_TRUE(adam->Step(theta, Eigen::VectorXd::Constant(1, grads[t])).ok());
    EXPECT_NEAR(theta(0), expected[t], 1e-14) << "step " << t + 1;
  }
  EXPECT_EQ(adam->step_count(), 3);
}

// With bias correction the first step is lr * g / (|g| + eps) ~ lr * sign(g)
// whatever the gradient's scale (Kingma & Ba 2015, Sec. 2.1); without it the
// step would be lr * (1 - beta1) / sqrt(1 - beta2) ~ 3.16 lr.
TEST(AdamTest, FirstStepHasLearningRateMagnitude) {
  AdamOptions options;
  options.learning_rate = 0.01;
  absl::StatusOr<Adam> adam = Adam::Create(3, options);
  ASSERT_TRUE(adam.ok());
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(3);
  Eigen::VectorXd g(3);
  g << 1e-3, -50.0, 7.0;
  ASSERT_TRUE(adam->Step(theta, g).ok());
  EXPECT_NEAR(theta(0), -0.01, 1e-6);
  EXPECT_NEAR(theta(1), 0.01, 1e-9);
  EXPECT_NEAR(theta(2), -0.01, 1e-9);
}

// Minimises f(x) = 0.5 sum_i a_i (x_i - c_i)^2 with curvatures spanning four
// orders of magnitude; gradient a .* (x - c).
TEST(AdamTest, ConvergesOnIllConditionedQuadratic) {
  Eigen::VectorXd a(4), c(4);
  a << 100.0, 1.0, 0.1, 0.01;
  c << 1.0, -2.0, 3.0, 0.5;
  AdamOptions options;
  options.learning_rate = 0.05;
  absl::StatusOr<Adam> adam = Adam::Create(4, options);
  ASSERT_TRUE(adam.ok());
  Eigen::VectorXd x = Eigen::VectorXd::Zero(4);
  for (int step = 0; step < 3000; ++step) {
    const Eigen::VectorXd grad = a.cwiseProduct(x - c);
    ASSERT_TRUE(adam->Step(x, grad).ok());
  }
  EXPECT_LT((x - c).lpNorm<Eigen::Infinity>(), 1e-3) << x.transpose();
}

// Gradient ascent (critic mode) maximises -||x - c||^2.
TEST(AdamTest, MaximizeAscendsConcaveObjective) {
  Eigen::VectorXd c(2);
  c << -1.5, 2.5;
  AdamOptions options;
  options.learning_rate = 0.05;
  options.maximize = true;
  absl::StatusOr<Adam> adam = Adam::Create(2, options);
  ASSERT_TRUE(adam.ok());
  Eigen::VectorXd x = Eigen::VectorXd::Zero(2);
  // d/dx of -||x - c||^2.
  ASSERT_TRUE(adam->Step(x, -2.0 * (x - c)).ok());
  EXPECT_LT(x(0), 0.0);  // moved towards c, i.e. along +gradient
  EXPECT_GT(x(1), 0.0);
  for (int step = 0; step < 2000; ++step) {
    ASSERT_TRUE(adam->Step(x, -2.0 * (x - c)).ok());
  }
  EXPECT_LT((x - c).lpNorm<Eigen::Infinity>(), 1e-3);
}

TEST(AdamTest, RestoredStateContinuesTheSameTrajectory) {
  AdamOptions options;
  options.learning_rate = 0.02;
  absl::StatusOr<Adam> full = Adam::Create(2, options);
  absl::StatusOr<Adam> resumed = Adam::Create(2, options);
  ASSERT_TRUE(full.ok() && resumed.ok());
  Eigen::VectorXd x(2), y(2);
  x << 0.3, -0.7;
  auto grad = [](const Eigen::VectorXd& v) { return Eigen::VectorXd(v.array().sin()); };
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(full->Step(x, grad(x)).ok());
  y = x;
  ASSERT_TRUE(
      resumed->RestoreState(full->first_moment(), full->second_moment(), full->step_count())
          .ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(full->Step(x, grad(x)).ok());
    ASSERT_TRUE(resumed->Step(y, grad(y)).ok());
  }
  EXPECT_EQ(x, y);
}

TEST(AdamTest, RejectsMismatchedSizesAndNonFiniteGradients) {
  absl::StatusOr<Adam> adam = Adam::Create(3, AdamOptions());
  ASSERT_TRUE(adam.ok());
  Eigen::VectorXd theta = Eigen::VectorXd::Ones(3);
  absl::Status wrong_size = adam->Step(theta, Eigen::VectorXd::Ones(2));
  EXPECT_EQ(wrong_size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_size.message(), HasSubstr("2 gradient entries"));
  Eigen::VectorXd bad(3);
  bad << 1.0, INFINITY, 0.0;
  absl::Status non_finite = adam->Step(theta, bad);
  EXPECT_EQ(non_finite.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(non_finite.message(), HasSubstr("Gradient entry 1 is inf"));
  EXPECT_EQ(theta, Eigen::VectorXd::Ones(3));
  EXPECT_EQ(adam->step_count(), 0);
  EXPECT_EQ(adam->first_moment(), Eigen::VectorXd::Zero(3));
}

TEST(AdamTest, CreateValidatesOptions) {
  AdamOptions options;
  options.learning_rate = -1;
  EXPECT_THAT(Adam::Create(3, options).status().message(),
              HasSubstr("Learning rate must be finite and positive, got -1"));
  options = AdamOptions();
  options.beta1 = 1.0;
  EXPECT_THAT(Adam::Create(3, options).status().message(),
              HasSubstr("Beta1 must be in [0, 1), got 1"));
  options = AdamOptions();
  options.beta2 = -0.1;
  EXPECT_THAT(Adam::Create(3, options).status().message(),
              HasSubstr("Beta2 must be in [0, 1), got -0.1"));
  options = AdamOptions();
  options.epsilon = 0;
  EXPECT_THAT(Adam::Create(3, options).status().message(),
              HasSubstr("Adam epsilon must be finite and positive, got 0"));
  EXPECT_THAT(Adam::Create(0, AdamOptions()).status().message(),
              HasSubstr("Number of parameters must be a positive integer, got 0"));
  absl::StatusOr<Adam> adam = Adam::Create(3, AdamOptions());
  ASSERT_TRUE(adam.ok());
  EXPECT_FALSE(adam->SetLearningRate(NAN).ok());
  EXPECT_TRUE(adam->SetLearningRate(0.5).ok());
  EXPECT_EQ(adam->options().learning_rate, 0.5);
}

}  // namespace
}  // namespace dpcurator::nn
