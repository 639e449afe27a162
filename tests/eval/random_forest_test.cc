#include "core/eval/random_forest.h"

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

// y = [x0 * x1 > 0] with x uniform on [-1, 1]^2, plus `noise` irrelevant
// features and 5% label flips (as gradient_boosted_trees_test.cc).
void MakeForestXor(int n, int noise, uint64_t seed, Eigen::MatrixXd* x, Eigen::VectorXi* y) {
  PublicRng rng(seed);
  x->resize(n, 2 + noise);
  y->resize(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 2 + noise; ++j) (*x)(i, j) = 2 * rng.Uniform() - 1;
    const bool positive = (*x)(i, 0) * (*x)(i, 1) > 0;
    (*y)(i) = (positive != (rng.Uniform() < 0.05)) ? 1 : 0;
  }
}

TEST(RandomForestTest, BeatsLogisticRegressionOnXor) {
  Eigen::MatrixXd x_train, x_test;
  Eigen::VectorXi y_train, y_test;
  MakeForestXor(4000, 3, 1, &x_train, &y_train);
  MakeForestXor(2000, 3, 2, &x_test, &y_test);
  const auto forest = RandomForest::Fit(x_train, y_train, 2);
  ASSERT_TRUE(forest.ok()) << forest.status();
  EXPECT_EQ((*forest)->num_trees(), 50);
  const auto lr = LogisticRegression::Fit(x_train, y_train, 2);
  ASSERT_TRUE(lr.ok()) << lr.status();
  const Eigen::MatrixXd proba = *(*forest)->PredictProba(x_test);
  // Bayes AUC with 5% flips is about 0.95; a linear score about 0.5.
  EXPECT_GT(*RocAuc(proba.col(1), y_test), 0.9);
  EXPECT_LT(*RocAuc((*(*lr)->PredictProba(x_test)).col(1), y_test), 0.6);
  EXPECT_GT(*Accuracy(proba, y_test), 0.85);
}

// A single stump on a clean threshold: its leaves hold one class each, so
// the forest's probabilities (bootstrap class shares) are exactly 0 and 1.
TEST(RandomForestTest, LeafValuesAreClassShares) {
  const int n = 200;
  Eigen::MatrixXd x(n, 1);
  Eigen::VectorXi y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = i / static_cast<double>(n);
    y(i) = i >= n / 2 ? 1 : 0;
  }
  RandomForestOptions options;
  options.num_trees = 1;
  options.max_depth = 1;
  const auto forest = RandomForest::Fit(x, y, 2, options);
  ASSERT_TRUE(forest.ok()) << forest.status();
  Eigen::MatrixXd query(2, 1);
  query << 0.1, 0.9;
  const Eigen::MatrixXd proba = *(*forest)->PredictProba(query);
  EXPECT_EQ(proba(0, 1), 0.0);
  EXPECT_EQ(proba(0, 0), 1.0);
  EXPECT_EQ(proba(1, 1), 1.0);
}

TEST(RandomForestTest, SeededAndIndependentOfThreadCount) {
  Eigen::MatrixXd x;
  Eigen::VectorXi y;
  MakeForestXor(3000, 8, 3, &x, &y);
  RandomForestOptions one_thread;
  one_thread.num_trees = 12;
  one_thread.num_threads = 1;
  RandomForestOptions three_threads = one_thread;
  three_threads.num_threads = 3;
  RandomForestOptions other_seed = one_thread;
  other_seed.seed = 2;
  const auto a = RandomForest::Fit(x, y, 2, one_thread);
  const auto b = RandomForest::Fit(x, y, 2, three_threads);
  const auto c = RandomForest::Fit(x, y, 2, other_seed);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const Eigen::MatrixXd pa = *(*a)->PredictProba(x);
  EXPECT_EQ(pa, *(*b)->PredictProba(x));
  EXPECT_NE(pa, *(*c)->PredictProba(x));
}

TEST(RandomForestTest, MulticlassBlobs) {
  PublicRng rng(4);
  const int n = 3000;
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXi y(n);
  for (int i = 0; i < n; ++i) {
    y(i) = i % 3;
    const double angle = 2.0 * 3.14159265358979 * y(i) / 3.0;
    x(i, 0) = 2 * std::cos(angle) + rng.Normal();
    x(i, 1) = 2 * std::sin(angle) + rng.Normal();
  }
  RandomForestOptions options;
  options.num_trees = 20;
  const auto forest = RandomForest::Fit(x, y, 3, options);
  ASSERT_TRUE(forest.ok()) << forest.status();
  EXPECT_EQ((*forest)->num_trees(), 60);  // One per class per sample.
  const Eigen::MatrixXd proba = *(*forest)->PredictProba(x);
  EXPECT_GT(*Accuracy(proba, y), 0.8);
  EXPECT_LT((proba.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-12);
}

TEST(RandomForestTest, ValidatesOptions) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(4, 1);
  Eigen::VectorXi y(4);
  y << 0, 0, 1, 1;
  RandomForestOptions bad;
  bad.max_depth = 0;
  const auto refused = RandomForest::Fit(x, y, 2, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("Max depth"));
}

}  // namespace
}  // namespace dpcurator::eval
