#include "core/eval/gradient_boosted_trees.h"

#include "Eigen/Core"
#include "core/eval/logistic_regression.h"
#include "core/eval/metrics.h"
#include "core/util/public_rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

// XOR-like: y = [x0 * x1 > 0] with x uniform on [-1, 1]^2, plus `noise`
// irrelevant uniform features and 5% label flips. No linear function of x
// separates the classes, so logistic regression stays near AUC 0.5.
void MakeXor(int n, int noise, uint64_t seed, Eigen::MatrixXd* x, Eigen::VectorXi* y) {
  PublicRng rng(seed);
  x->resize(n, 2 + noise);
  y->resize(n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < 2 + noise; ++j) (*x)(i, j) = 2 * rng.Uniform() - 1;
    const bool positive = (*x)(i, 0) * (*x)(i, 1) > 0;
    (*y)(i) = (positive != (rng.Uniform() < 0.05)) ? 1 : 0;
  }
}

TEST(GradientBoostedTreesTest, BeatsLogisticRegressionOnXor) {
  Eigen::MatrixXd x_train, x_test;
  Eigen::VectorXi y_train, y_test;
  MakeXor(4000, 3, 1, &x_train, &y_train);
  MakeXor(2000, 3, 2, &x_test, &y_test);

  const auto gbt = GradientBoostedTrees::Fit(x_train, y_train, 2);
  ASSERT_TRUE(gbt.ok()) << gbt.status();
  const auto lr = LogisticRegression::Fit(x_train, y_train, 2);
  ASSERT_TRUE(lr.ok()) << lr.status();
  const Eigen::MatrixXd gbt_proba = *(*gbt)->PredictProba(x_test);
  const Eigen::MatrixXd lr_proba = *(*lr)->PredictProba(x_test);
  const double gbt_auc = *RocAuc(gbt_proba.col(1), y_test);
  const double lr_auc = *RocAuc(lr_proba.col(1), y_test);
  // Bayes AUC with 5% flips is about 0.95; a linear score is about 0.5.
  EXPECT_GT(gbt_auc, 0.9);
  EXPECT_LT(lr_auc, 0.6);
  EXPECT_GT(*Accuracy(gbt_proba, y_test), 0.85);
  EXPECT_EQ((*gbt)->num_trees(), 200);
}

TEST(GradientBoostedTreesTest, DeterministicAcrossThreadCounts) {
  Eigen::MatrixXd x;
  Eigen::VectorXi y;
  // 12000 x 100: the root and first levels are above the threshold at which
  // histogram building goes parallel.
  MakeXor(12000, 98, 3, &x, &y);
  GradientBoostedTreesOptions one_thread;
  one_thread.num_rounds = 10;
  one_thread.num_threads = 1;
  GradientBoostedTreesOptions three_threads = one_thread;
  three_threads.num_threads = 3;
  const auto a = GradientBoostedTrees::Fit(x, y, 2, one_thread);
  const auto b = GradientBoostedTrees::Fit(x, y, 2, three_threads);
  const auto c = GradientBoostedTrees::Fit(x, y, 2, three_threads);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const Eigen::MatrixXd pa = *(*a)->PredictProba(x);
  EXPECT_EQ(pa, *(*b)->PredictProba(x));
  EXPECT_EQ(pa, *(*c)->PredictProba(x));
}

TEST(GradientBoostedTreesTest, MulticlassBlobs) {
  // Three classes on a ring: class k centred at angle 2 pi k / 3, radius 2.
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
  GradientBoostedTreesOptions options;
  options.num_rounds = 50;
  const auto model = GradientBoostedTrees::Fit(x, y, 3, options);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->num_trees(), 150);
  const Eigen::MatrixXd proba = *(*model)->PredictProba(x);
  EXPECT_TRUE((proba.rowwise().sum().array() - 1.0).abs().maxCoeff() < 1e-12);
  // Bayes accuracy for these blobs is about 0.87.
  EXPECT_GT(*Accuracy(proba, y), 0.8);
  EXPECT_GT(*MacroRocAuc(proba, y), 0.9);
}

TEST(GradientBoostedTreesTest, StumpSplitsAtMidpointOfDistinctValues) {
  // One feature with values 0, 1, 2, 3; labels 0, 0, 1, 1 (each repeated).
  // Every depth-1 tree splits at 1.5 (the midpoint of 1 and 2), so all rows
  // with x < 1.5 share one score.
  Eigen::MatrixXd x(40, 1);
  Eigen::VectorXi y(40);
  for (int i = 0; i < 40; ++i) {
    x(i, 0) = i % 4;
    y(i) = (i % 4) >= 2 ? 1 : 0;
  }
  GradientBoostedTreesOptions options;
  options.max_depth = 1;
  options.num_rounds = 20;
  const auto model = GradientBoostedTrees::Fit(x, y, 2, options);
  ASSERT_TRUE(model.ok()) << model.status();
  Eigen::MatrixXd probe(4, 1);
  probe << 1.49, -5, 1.5, 7;
  const Eigen::MatrixXd proba = *(*model)->PredictProba(probe);
  EXPECT_EQ(proba(0, 1), proba(1, 1));
  EXPECT_EQ(proba(2, 1), proba(3, 1));
  EXPECT_LT(proba(0, 1), 0.2);
  EXPECT_GT(proba(2, 1), 0.8);
  EXPECT_EQ((*model)->num_leaves(), 40);
}

TEST(GradientBoostedTreesTest, ConstantFeaturesGiveThePrior) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Ones(10, 2);
  Eigen::VectorXi y(10);
  y << 1, 0, 0, 0, 1, 0, 0, 0, 0, 0;
  const auto model = GradientBoostedTrees::Fit(x, y, 2);
  ASSERT_TRUE(model.ok());
  const Eigen::MatrixXd proba = *(*model)->PredictProba(x.topRows(1));
  EXPECT_NEAR(proba(0, 1), 0.2, 1e-12);
}

TEST(GradientBoostedTreesTest, ValidatesOptions) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(4, 1);
  Eigen::VectorXi y(4);
  y << 0, 1, 0, 1;
  GradientBoostedTreesOptions options;
  options.learning_rate = 0;
  EXPECT_THAT(GradientBoostedTrees::Fit(x, y, 2, options).status().message(),
              HasSubstr("Learning rate must be finite and positive"));
  options = {};
  options.max_bins = 300;
  EXPECT_THAT(GradientBoostedTrees::Fit(x, y, 2, options).status().message(),
              HasSubstr("Max bins must be in [2, 256]"));
  options = {};
  options.max_depth = 0;
  EXPECT_THAT(GradientBoostedTrees::Fit(x, y, 2, options).status().message(),
              HasSubstr("Max depth must be in [1, 16]"));
}

}  // namespace
}  // namespace dpcurator::eval
