#include "core/eval/evaluator.h"

#include <cmath>

#include "Eigen/Core"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/util/public_rng.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

// age: numeric [18, 90]; hours: numeric [0, 80]; color: {red, green, blue};
// label income: {low, high}.
data::Schema IncomeSchema() {
  auto schema = data::Schema::Builder()
                    .AddNumeric("age", 18, 90, /*integer=*/true)
                    .AddCategorical("color", {"red", "green", "blue"})
                    .AddNumeric("hours", 0, 80)
                    .AddCategorical("income", {"low", "high"})
                    .SetLabel("income")
                    .Build();
  EXPECT_TRUE(schema.ok()) << schema.status();
  return *schema;
}

// P(high) = sigmoid(-2 + 3 [age > 45] [color != blue] + 2 [color = blue] (hours > 40)
//                   + noise): an interaction, so trees have an edge.
data::Table SampleIncome(int n, uint64_t seed) {
  PublicRng rng(seed);
  data::Table table;
  table.cells.resize(n, 4);
  for (int i = 0; i < n; ++i) {
    const double age = std::round(18 + 72 * rng.Uniform());
    const int color = static_cast<int>(rng.UniformInt(3));
    const double hours = 80 * rng.Uniform();
    const double logit =
        -2 + 3.0 * (age > 45 && color != 2) + 4.0 * (color == 2 && hours > 40);
    const int label = rng.Uniform() < 1 / (1 + std::exp(-logit)) ? 1 : 0;
    table.cells.row(i) << age, color, hours, label;
  }
  return table;
}

TEST(EvaluateTest, EndToEndOnSimilarSynthetic) {
  const data::Schema schema = IncomeSchema();
  const data::Table synthetic = SampleIncome(3000, 1);
  const data::Table real_train = SampleIncome(3000, 2);
  const data::Table real_test = SampleIncome(2000, 3);
  EvalOptions options;
  options.gradient_boosted_trees.num_rounds = 100;
  // The paper metrics have their own tests (paper_metrics_test.cc); their
  // exact-assignment PCA score was 80% of this test's time.
  options.compute_paper_metrics = false;
  const auto report = Evaluate(schema, synthetic, real_test, options, &real_train);
  ASSERT_TRUE(report.ok()) << report.status();

  EXPECT_EQ(report->num_classes, 2);
  EXPECT_EQ(report->positive_class, "high");
  EXPECT_EQ(report->feature_dim, 5);  // age, hours, 3 color levels.
  EXPECT_EQ(report->synthetic_rows, 3000);
  EXPECT_EQ(report->real_test_rows, 2000);
  EXPECT_EQ(report->real_train_rows, 3000);
  EXPECT_TRUE(report->warnings.empty());
  // The default family (issue 38): four classifiers per source.
  ASSERT_EQ(report->utility.size(), 8u);
  EXPECT_EQ(report->utility[0].classifier, "logistic_regression");
  EXPECT_EQ(report->utility[0].train_source, "synthetic");
  EXPECT_EQ(report->utility[1].classifier, "gradient_boosted_trees");
  EXPECT_EQ(report->utility[2].classifier, "naive_bayes");
  EXPECT_EQ(report->utility[3].classifier, "random_forest");
  EXPECT_EQ(report->utility[3].train_source, "synthetic");
  EXPECT_EQ(report->utility[4].train_source, "real");
  for (const ClassifierResult& r : report->utility) {
    EXPECT_GT(r.roc_auc, 0.7) << r.classifier << " " << r.train_source;
    EXPECT_GT(r.pr_auc, 0.5) << r.classifier;
    EXPECT_GT(r.accuracy, 0.6) << r.classifier;
    EXPECT_GT(r.macro_f1, 0.5) << r.classifier;
    EXPECT_GE(r.fit_seconds, 0.0);
    EXPECT_EQ(r.training_classes, 2);
    EXPECT_FALSE(r.single_class_training);
  }
  // The interaction favours trees.
  EXPECT_GT(report->utility[1].roc_auc, report->utility[0].roc_auc);

  ASSERT_TRUE(report->fidelity.has_value());
  ASSERT_TRUE(report->real_train_fidelity.has_value());
  EXPECT_EQ(report->fidelity->columns.size(), 4u);
  // Same distribution: sampling noise only.
  EXPECT_LT(report->fidelity->mean_tv_distance, 0.05);
  EXPECT_LT(report->fidelity->correlation_mean_abs_difference, 0.05);
  EXPECT_GT(report->fidelity->correlation_pairs, 0);
}

TEST(EvaluateTest, DistortedSyntheticScoresWorse) {
  const data::Schema schema = IncomeSchema();
  data::Table synthetic = SampleIncome(2000, 4);
  // Shuffle the labels' relation away: label = 1 for blue only.
  for (int i = 0; i < synthetic.num_rows(); ++i) {
    synthetic.cells(i, 3) = synthetic.cells(i, 1) == 2 ? 1 : 0;
    synthetic.cells(i, 0) = 18;  // Collapse age.
  }
  const data::Table real_test = SampleIncome(2000, 5);
  EvalOptions options;
  options.gradient_boosted_trees.num_rounds = 50;
  options.compute_paper_metrics = false;  // tested on their own, slow here
  const auto good = Evaluate(schema, SampleIncome(2000, 6), real_test, options);
  const auto bad = Evaluate(schema, synthetic, real_test, options);
  ASSERT_TRUE(good.ok() && bad.ok());
  EXPECT_GT(bad->fidelity->columns[0].tv_distance, 0.9);  // age all in one bin.
  EXPECT_EQ(bad->fidelity->max_tv_column, "age");
  EXPECT_GT(bad->fidelity->mean_tv_distance, good->fidelity->mean_tv_distance);
  // age is constant in the synthetic rows: dropped from the correlations.
  EXPECT_EQ(bad->fidelity->constant_features_dropped, 1);
  EXPECT_LT(bad->utility[1].roc_auc, good->utility[1].roc_auc);
}

TEST(EvaluateTest, SingleClassSyntheticIsFlaggedAsChance) {
  const data::Schema schema = IncomeSchema();
  data::Table synthetic = SampleIncome(500, 7);
  synthetic.cells.col(3).setZero();
  const data::Table real_test = SampleIncome(1000, 8);
  const double positives = real_test.cells.col(3).sum();
  const auto report = Evaluate(schema, synthetic, real_test, EvalOptions());
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->utility.size(), 4u);
  for (const ClassifierResult& r : report->utility) {
    EXPECT_TRUE(r.single_class_training);
    EXPECT_EQ(r.training_classes, 1);
    EXPECT_DOUBLE_EQ(r.roc_auc, 0.5);
    EXPECT_DOUBLE_EQ(r.pr_auc, positives / 1000);  // Prevalence.
    EXPECT_DOUBLE_EQ(r.accuracy, 1 - positives / 1000);
    EXPECT_EQ(r.fit_seconds, 0.0);
  }
  ASSERT_EQ(report->warnings.size(), 4u);
  EXPECT_THAT(report->warnings[0], HasSubstr("single class of label 'income'"));
  EXPECT_TRUE(report->fidelity.has_value());

  EvalOptions strict;
  strict.single_class_policy = EvalOptions::SingleClassPolicy::kFail;
  const auto refused = Evaluate(schema, synthetic, real_test, strict);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("synthetic rows: The training rows hold a single label class"));
}

TEST(EvaluateTest, RejectsBadInputs) {
  const data::Schema schema = IncomeSchema();
  const data::Table table = SampleIncome(100, 9);
  data::Table one_class_test = SampleIncome(100, 10);
  one_class_test.cells.col(3).setOnes();
  EXPECT_THAT(Evaluate(schema, table, one_class_test, EvalOptions()).status().message(),
              HasSubstr("real test table holds a single class of label 'income'"));

  data::Table narrow;
  narrow.cells = table.cells.leftCols(3);
  EXPECT_THAT(Evaluate(schema, narrow, table, EvalOptions()).status().message(),
              HasSubstr("synthetic table has 3 columns"));
  EXPECT_THAT(Evaluate(schema, table, table, EvalOptions(), &narrow).status().message(),
              HasSubstr("real training table has 3 columns"));

  EvalOptions options;
  options.classifiers.clear();
  EXPECT_THAT(Evaluate(schema, table, table, options).status().message(),
              HasSubstr("at least one classifier"));
  options.compute_utility = false;
  const auto fidelity_only = Evaluate(schema, table, table, options);
  ASSERT_TRUE(fidelity_only.ok());
  EXPECT_TRUE(fidelity_only->utility.empty());
}

TEST(EvaluateTest, MulticlassAndUnlabelled) {
  auto schema = data::Schema::Builder()
                    .AddNumeric("x", -5, 5)
                    .AddCategorical("kind", {"a", "b", "c"})
                    .SetLabel("kind")
                    .Build();
  ASSERT_TRUE(schema.ok()) << schema.status();
  auto make = [](int n, uint64_t seed) {
    PublicRng rng(seed);
    data::Table t;
    t.cells.resize(n, 2);
    for (int i = 0; i < n; ++i) {
      const int k = i % 3;
      t.cells(i, 0) = std::clamp(2.0 * (k - 1) + 0.7 * rng.Normal(), -5.0, 5.0);
      t.cells(i, 1) = k;
    }
    return t;
  };
  EvalOptions options;
  options.gradient_boosted_trees.num_rounds = 30;
  const auto report = Evaluate(*schema, make(900, 1), make(600, 2), options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->num_classes, 3);
  EXPECT_EQ(report->positive_class, "");
  for (const ClassifierResult& r : report->utility) {
    EXPECT_GT(r.roc_auc, 0.9) << r.classifier;
    EXPECT_GT(r.accuracy, 0.8) << r.classifier;
    EXPECT_EQ(r.training_classes, 3);
  }

  auto unlabelled = data::Schema::Builder().AddNumeric("x", -5, 5).Build();
  ASSERT_TRUE(unlabelled.ok());
  data::Table t;
  t.cells = Eigen::MatrixXd::Zero(10, 1);
  const auto fidelity_only = Evaluate(*unlabelled, t, t, EvalOptions());
  ASSERT_TRUE(fidelity_only.ok()) << fidelity_only.status();
  EXPECT_TRUE(fidelity_only->utility.empty());
  ASSERT_EQ(fidelity_only->warnings.size(), 1u);
  EXPECT_THAT(fidelity_only->warnings[0], HasSubstr("no label column"));
  EXPECT_EQ(fidelity_only->fidelity->mean_tv_distance, 0.0);
}

}  // namespace
}  // namespace dpcurator::eval
