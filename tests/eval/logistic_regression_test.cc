#include "core/eval/logistic_regression.h"

#include <cmath>

#include "Eigen/Core"
#include "core/eval/internal/lbfgs.h"
#include "core/eval/metrics.h"
#include "core/util/public_rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

// Draws y ~ Bernoulli(sigmoid(x w + b)) for x with columns N(0,1), N(3, 2^2)
// and N(-1, 0.5^2): unequal scales check the un-standardisation.
void SimulateBinary(int n, const Eigen::Vector3d& w, double b, uint64_t seed,
                    Eigen::MatrixXd* x, Eigen::VectorXi* y) {
  PublicRng rng(seed);
  x->resize(n, 3);
  y->resize(n);
  for (int i = 0; i < n; ++i) {
    (*x)(i, 0) = rng.Normal();
    (*x)(i, 1) = 3.0 + 2.0 * rng.Normal();
    (*x)(i, 2) = -1.0 + 0.5 * rng.Normal();
    const double logit = x->row(i).dot(w) + b;
    (*y)(i) = rng.Uniform() < 1.0 / (1.0 + std::exp(-logit)) ? 1 : 0;
  }
}

TEST(LogisticRegressionTest, RecoversBinaryCoefficients) {
  const Eigen::Vector3d w(1.5, -0.8, 1.0);
  const double b = 2.0;
  Eigen::MatrixXd x;
  Eigen::VectorXi y;
  SimulateBinary(40000, w, b, 7, &x, &y);
  const auto model = LogisticRegression::Fit(x, y, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->converged());
  ASSERT_EQ((*model)->coefficients().rows(), 3);
  ASSERT_EQ((*model)->coefficients().cols(), 1);
  // Standard errors are about 0.02-0.06 at this n; the ridge bias is ~1e-4.
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR((*model)->coefficients()(j, 0), w(j), 0.1) << "coefficient " << j;
  }
  EXPECT_NEAR((*model)->intercepts()(0), b, 0.15);

  // Probabilities agree with the fitted linear predictor in original units.
  const auto proba = (*model)->PredictProba(x.topRows(5));
  ASSERT_TRUE(proba.ok());
  for (int i = 0; i < 5; ++i) {
    const double logit =
        x.row(i).dot((*model)->coefficients().col(0)) + (*model)->intercepts()(0);
    EXPECT_NEAR((*proba)(i, 1), 1.0 / (1.0 + std::exp(-logit)), 1e-12);
    EXPECT_NEAR((*proba).row(i).sum(), 1.0, 1e-12);
  }
}

TEST(LogisticRegressionTest, MultinomialWithTwoPresentClassesMatchesBinary) {
  // With a third class absent from y, the multinomial (L-BFGS) fit's logit
  // difference between classes 1 and 0 is the binary (Newton) log-odds, up to
  // the ridge (lambda = 1e-4 on both, split over two columns).
  Eigen::MatrixXd x;
  Eigen::VectorXi y;
  SimulateBinary(3000, Eigen::Vector3d(1.0, 0.5, -1.0), 0.2, 11, &x, &y);
  const auto newton = LogisticRegression::Fit(x, y, 2);
  ASSERT_TRUE(newton.ok());
  const auto multinomial = LogisticRegression::Fit(x, y, 3);
  ASSERT_TRUE(multinomial.ok()) << multinomial.status();
  const Eigen::MatrixXd c = (*multinomial)->coefficients();
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(c(j, 1) - c(j, 0), (*newton)->coefficients()(j, 0), 2e-2);
  }
  const auto proba = (*multinomial)->PredictProba(x.topRows(20));
  ASSERT_TRUE(proba.ok());
  EXPECT_LT((*proba).col(2).maxCoeff(), 1e-3);
}

TEST(LbfgsTest, MinimisesRosenbrock) {
  // f(a, b) = (1 - a)^2 + 100 (b - a^2)^2, minimum 0 at (1, 1).
  const internal::Objective rosenbrock = [](const Eigen::VectorXd& v, Eigen::VectorXd* g) {
    const double a = v(0), b = v(1);
    (*g)(0) = -2 * (1 - a) - 400 * a * (b - a * a);
    (*g)(1) = 200 * (b - a * a);
    return (1 - a) * (1 - a) + 100 * (b - a * a) * (b - a * a);
  };
  Eigen::VectorXd v(2);
  v << -1.2, 1.0;
  internal::LbfgsOptions options;
  options.gradient_tolerance = 1e-9;
  options.relative_function_tolerance = 0;
  const internal::LbfgsResult result = internal::MinimizeLbfgs(rosenbrock, &v, options);
  EXPECT_TRUE(result.converged);
  EXPECT_NEAR(v(0), 1.0, 1e-6);
  EXPECT_NEAR(v(1), 1.0, 1e-6);
}

TEST(LogisticRegressionTest, RecoversMultinomialCoefficientDifferences) {
  // Softmax logits z_k = x W_k + b_k with W_0 = 0 (only differences are
  // identified).
  const int n = 40000;
  Eigen::MatrixXd w(2, 3);
  w << 0.0, 1.0, -1.0,  //
      0.0, -0.5, -1.5;
  const Eigen::RowVector3d b(0.0, 0.5, -0.2);
  PublicRng rng(3);
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXi y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = rng.Normal();
    x(i, 1) = rng.Normal();
    const Eigen::RowVector3d z = x.row(i) * w + b;
    const Eigen::RowVector3d p = z.array().exp() / z.array().exp().sum();
    const double u = rng.Uniform();
    y(i) = u < p(0) ? 0 : (u < p(0) + p(1) ? 1 : 2);
  }
  const auto model = LogisticRegression::Fit(x, y, 3);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->converged());
  const Eigen::MatrixXd c = (*model)->coefficients();
  const Eigen::VectorXd d = (*model)->intercepts();
  for (int k = 1; k < 3; ++k) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_NEAR(c(j, k) - c(j, 0), w(j, k), 0.1) << "class " << k << " feature " << j;
    }
    EXPECT_NEAR(d(k) - d(0), b(k), 0.1) << "class " << k;
  }
  const auto proba = (*model)->PredictProba(x.topRows(10));
  ASSERT_TRUE(proba.ok());
  EXPECT_TRUE(((*proba).rowwise().sum().array() - 1.0).abs().maxCoeff() < 1e-12);
}

TEST(LogisticRegressionTest, OneVsRestGivesNormalisedProbabilities) {
  PublicRng rng(5);
  const int n = 600;
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXi y(n);
  for (int i = 0; i < n; ++i) {
    y(i) = i % 3;
    x(i, 0) = 2.0 * (y(i) == 1) + rng.Normal();
    x(i, 1) = 2.0 * (y(i) == 2) + rng.Normal();
  }
  LogisticRegressionOptions options;
  options.multiclass = LogisticRegressionOptions::Multiclass::kOneVsRest;
  const auto model = LogisticRegression::Fit(x, y, 3, options);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto proba = (*model)->PredictProba(x);
  ASSERT_TRUE(proba.ok());
  EXPECT_TRUE(((*proba).rowwise().sum().array() - 1.0).abs().maxCoeff() < 1e-12);
  EXPECT_GT(*Accuracy(*proba, y), 0.6);
}

TEST(LogisticRegressionTest, SeparableDataStaysFinite) {
  Eigen::MatrixXd x(4, 1);
  x << -2, -1, 1, 2;
  Eigen::VectorXi y(4);
  y << 0, 0, 1, 1;
  const auto model = LogisticRegression::Fit(x, y, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->coefficients().allFinite());
  EXPECT_GT((*model)->coefficients()(0, 0), 0.0);
}

TEST(LogisticRegressionTest, ValidatesInputsAndOptions) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(3, 2);
  Eigen::VectorXi y(3);
  y << 0, 1, 2;
  EXPECT_THAT(LogisticRegression::Fit(x, y, 2).status().message(),
              HasSubstr("outside [0, 2)"));
  EXPECT_THAT(LogisticRegression::Fit(x, y.head(2), 3).status().message(),
              HasSubstr("2 entries but features have 3 rows"));
  LogisticRegressionOptions options;
  options.l2 = -1;
  EXPECT_THAT(LogisticRegression::Fit(x, y, 3, options).status().message(),
              HasSubstr("L2 must be finite and non-negative"));
  x(0, 0) = std::nan("");
  EXPECT_THAT(LogisticRegression::Fit(x, y, 3).status().message(), HasSubstr("finite"));
  x(0, 0) = 0;
  const auto model = LogisticRegression::Fit(x, y, 3);
  ASSERT_TRUE(model.ok());
  EXPECT_THAT((*model)->PredictProba(Eigen::MatrixXd::Zero(1, 3)).status().message(),
              HasSubstr("fitted on 2 features but input has 3"));
}

}  // namespace
}  // namespace dpcurator::eval
