#include "core/eval/naive_bayes.h"

#include <cmath>

#include "Eigen/Core"
#include "core/eval/logistic_regression.h"
#include "core/eval/metrics.h"
#include "core/util/public_rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

// Two features, hand-computed: class 0 rows (0, 0), (2, 2); class 1 rows
// (4, 1), (6, 3), (4, 1), (6, 3). Means (1, 1) and (5, 2), every
// maximum-likelihood variance 1, priors 1/3 and 2/3. At x = (2, 2):
//   log P(1|x) - log P(0|x) = log 2 - 1/2 [(2-5)^2 - (2-1)^2] - 1/2 [(2-2)^2 - (2-1)^2]
//                           = log 2 - 4 + 1/2,
// so P(1|x) = 2 / (2 + e^3.5) = 0.0569556; at x = (3, 1.5) the squares tie
// per feature (4 - 4, 0.25 - 0.25) and P(1|x) = 2/3. The smoothing adds
// 1e-9 times the largest feature variance (35/6 - (11/3)^2 = 4.56) to
// each variance, far below these digits.
TEST(NaiveBayesTest, KnownAnswerPosterior) {
  Eigen::MatrixXd x(6, 2);
  x << 0, 0, 2, 2, 4, 1, 6, 3, 4, 1, 6, 3;
  Eigen::VectorXi y(6);
  y << 0, 0, 1, 1, 1, 1;
  const auto model = NaiveBayes::Fit(x, y, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_NEAR((*model)->means()(0, 0), 1.0, 1e-12);
  EXPECT_NEAR((*model)->means()(1, 0), 5.0, 1e-12);
  EXPECT_NEAR((*model)->means()(1, 1), 2.0, 1e-12);
  EXPECT_NEAR((*model)->variances()(0, 1), 1.0, 1e-8);
  EXPECT_NEAR((*model)->variances()(1, 0), 1.0, 1e-8);
  Eigen::MatrixXd query(2, 2);
  query << 2, 2, 3, 1.5;
  const auto proba = (*model)->PredictProba(query);
  ASSERT_TRUE(proba.ok()) << proba.status();
  EXPECT_NEAR((*proba)(0, 1), 2.0 / (2.0 + std::exp(3.5)), 1e-7);
  EXPECT_NEAR((*proba)(0, 0), 1.0 - 2.0 / (2.0 + std::exp(3.5)), 1e-7);
  EXPECT_NEAR((*proba)(1, 1), 2.0 / 3.0, 1e-7);
}

// The point of naive Bayes in the family (issue 38): an indicator that is 0
// in every training row of a class has variance eps there, so a real row
// with that indicator set is all but impossible under the class, whatever
// its other features say. Logistic regression, fitted on the same rows,
// stays unsure about the same row.
TEST(NaiveBayesTest, SeesAHardZero) {
  PublicRng rng(5);
  const int n = 2000;
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXi y(n);
  for (int i = 0; i < n; ++i) {
    y(i) = i % 2;
    x(i, 0) = y(i) + 0.5 * rng.Normal();  // Informative numeric feature.
    // An indicator set in 10% of class-0 rows and never in class 1's.
    x(i, 1) = (y(i) == 0 && rng.Uniform() < 0.1) ? 1.0 : 0.0;
  }
  Eigen::MatrixXd query(1, 2);
  query << 1.5, 1.0;  // Class 1 by the numeric feature, with the indicator.
  const auto nb = NaiveBayes::Fit(x, y, 2);
  ASSERT_TRUE(nb.ok()) << nb.status();
  EXPECT_LT((*(*nb)->PredictProba(query))(0, 1), 1e-6);
  const auto lr = LogisticRegression::Fit(x, y, 2);
  ASSERT_TRUE(lr.ok()) << lr.status();
  EXPECT_GT((*(*lr)->PredictProba(query))(0, 1), 1e-3);
}

TEST(NaiveBayesTest, SeparatesBlobsAndGivesAbsentClassesZero) {
  // Three Gaussian classes on a ring, labelled as 4 classes of which class 3
  // never occurs in training.
  PublicRng rng(6);
  const int n = 3000;
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXi y(n);
  for (int i = 0; i < n; ++i) {
    y(i) = i % 3;
    const double angle = 2.0 * 3.14159265358979 * y(i) / 3.0;
    x(i, 0) = 3 * std::cos(angle) + rng.Normal();
    x(i, 1) = 3 * std::sin(angle) + rng.Normal();
  }
  const auto model = NaiveBayes::Fit(x, y, 4);
  ASSERT_TRUE(model.ok()) << model.status();
  const Eigen::MatrixXd proba = *(*model)->PredictProba(x);
  EXPECT_GT(*Accuracy(proba, y), 0.9);
  EXPECT_EQ(proba.col(3).maxCoeff(), 0.0);
  EXPECT_LT((proba.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-12);
}

TEST(NaiveBayesTest, ValidatesOptionsAndInput) {
  Eigen::MatrixXd x(4, 1);
  x << 0, 1, 2, 3;
  Eigen::VectorXi y(4);
  y << 0, 0, 1, 1;
  NaiveBayesOptions bad;
  bad.var_smoothing = 0.0;
  const auto refused = NaiveBayes::Fit(x, y, 2, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("Variance smoothing"));
  // Constant features keep positive variances.
  const auto constant = NaiveBayes::Fit(Eigen::MatrixXd::Zero(4, 1), y, 2);
  ASSERT_TRUE(constant.ok()) << constant.status();
  EXPECT_GT((*constant)->variances().minCoeff(), 0.0);
  const auto model = NaiveBayes::Fit(x, y, 2);
  ASSERT_TRUE(model.ok());
  EXPECT_FALSE((*model)->PredictProba(Eigen::MatrixXd::Zero(2, 3)).ok());
}

}  // namespace
}  // namespace dpcurator::eval
