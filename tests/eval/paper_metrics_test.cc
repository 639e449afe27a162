#include "core/eval/paper_metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/eval/evaluator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

data::Table MakePaperTable(const std::vector<std::vector<double>>& rows) {
  data::Table table;
  table.cells.resize(static_cast<Eigen::Index>(rows.size()),
                     static_cast<Eigen::Index>(rows[0].size()));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) table.cells(i, j) = rows[i][j];
  }
  return table;
}

data::Schema Build(const data::Schema::Builder& builder) {
  auto schema = builder.Build();
  EXPECT_TRUE(schema.ok()) << schema.status();
  return *schema;
}

// ---- 3-way marginals ----

TEST(ThreeWayMarginalTest, IdenticalTablesHaveZeroDistance) {
  const data::Schema schema = Build(data::Schema::Builder()
                                        .AddNumeric("x", 0, 100)
                                        .AddCategorical("a", {"p", "q"})
                                        .AddCategorical("b", {"p", "q", "r"})
                                        .AddCategorical("c", {"p", "q"}));
  const data::Table t = MakePaperTable({{3, 0, 2, 1}, {55, 1, 0, 0}, {99, 1, 1, 1}});
  const auto result = ThreeWayMarginalDistance(schema, t, t, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->triples, 4);  // All C(4, 3) triples: fewer than 100.
  EXPECT_EQ(result->mean_l1, 0.0);
  EXPECT_EQ(result->max_l1, 0.0);
}

TEST(ThreeWayMarginalTest, DistanceIsTwiceTheTotalVariation) {
  const data::Schema schema = Build(data::Schema::Builder()
                                        .AddCategorical("a", {"0", "1"})
                                        .AddCategorical("b", {"0", "1"})
                                        .AddCategorical("c", {"0", "1"}));
  // Candidate: all mass on (0,0,0); reference: half there, half on (1,1,1).
  // L1 = |1 - 1/2| + |0 - 1/2| = 1 = 2 TV (TV = 1/2); a missing doubling
  // would give 0.5.
  const data::Table candidate = MakePaperTable({{0, 0, 0}, {0, 0, 0}});
  const data::Table reference = MakePaperTable({{0, 0, 0}, {1, 1, 1}});
  const auto result = ThreeWayMarginalDistance(schema, candidate, reference, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->triples, 1);
  EXPECT_DOUBLE_EQ(result->mean_l1, 1.0);
  // Disjoint supports: the maximum, 2.
  const data::Table other = MakePaperTable({{1, 0, 1}, {0, 1, 0}});
  const auto disjoint = ThreeWayMarginalDistance(schema, other, reference, {});
  ASSERT_TRUE(disjoint.ok());
  EXPECT_DOUBLE_EQ(disjoint->mean_l1, 2.0);
}

TEST(ThreeWayMarginalTest, NumericBinsAreOnePercentOfTheDeclaredRange) {
  const data::Schema schema = Build(data::Schema::Builder()
                                        .AddNumeric("x", 0, 100)
                                        .AddCategorical("a", {"0"})
                                        .AddCategorical("b", {"0"}));
  auto distance = [&](double candidate_x, double reference_x) {
    const auto r = ThreeWayMarginalDistance(schema, MakePaperTable({{candidate_x, 0, 0}}),
                                            MakePaperTable({{reference_x, 0, 0}}), {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r->mean_l1;
  };
  EXPECT_EQ(distance(0.2, 0.8), 0.0);    // Both in [0, 1).
  EXPECT_EQ(distance(0.5, 1.5), 2.0);    // Bins 0 and 1.
  EXPECT_EQ(distance(0.99, 1.0), 2.0);   // 1.0 starts bin 1 (floor).
  EXPECT_EQ(distance(99.5, 100), 0.0);   // The upper bound falls in the last bin.
  EXPECT_EQ(distance(98.9, 99.1), 2.0);  // Bins 98 and 99.
}

TEST(ThreeWayMarginalTest, SamplesTheRequestedNumberOfDistinctTriples) {
  data::Schema::Builder builder;
  for (int c = 0; c < 8; ++c) builder.AddCategorical(absl::StrCat("c", c), {"0", "1"});
  const data::Schema schema = Build(builder);
  const data::Table t = MakePaperTable({{0, 1, 0, 1, 0, 1, 0, 1}, {1, 1, 0, 0, 1, 1, 0, 0}});
  PaperMetricsOptions options;
  options.marginal_triples = 10;  // Of C(8, 3) = 56.
  const auto result = ThreeWayMarginalDistance(schema, t, t, options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->triples, 10);
  options.marginal_triples = 100;
  const auto all = ThreeWayMarginalDistance(schema, t, t, options);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->triples, 56);
}

// ---- 2-way PCA Wasserstein ----

data::Schema TwoNumerics() {
  return Build(data::Schema::Builder().AddNumeric("x", 0, 10).AddNumeric("y", 0, 10));
}

TEST(PcaWassersteinTest, IdenticalTablesScoreOne) {
  const data::Schema schema = TwoNumerics();
  const data::Table t = MakePaperTable({{0, 1}, {3, 2}, {7, 9}, {10, 4}});
  const auto result = PcaWassersteinScore(schema, t, t, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->w1, 0.0, 1e-12);
  EXPECT_NEAR(result->score, 1.0, 1e-12);
  EXPECT_NEAR(result->explained_variance_ratio, 1.0, 1e-12);  // Two axes of two.
  EXPECT_DOUBLE_EQ(result->diameter, std::sqrt(2.0));
}

TEST(PcaWassersteinTest, ShiftedTableHasTheShiftAsDistance) {
  const data::Schema schema = TwoNumerics();
  // y is constant, so the axes are x and y (v = 1); the candidate's x is the
  // reference's plus 1 (0.1 encoded): W1 = 0.1.
  const data::Table reference = MakePaperTable({{0, 5}, {1, 5}, {2, 5}, {3, 5}});
  const data::Table candidate = MakePaperTable({{1, 5}, {2, 5}, {3, 5}, {4, 5}});
  const auto result = PcaWassersteinScore(schema, candidate, reference, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->w1, 0.1, 1e-12);
  EXPECT_NEAR(result->score, 1.0 - 0.1 / std::sqrt(2.0), 1e-12);
}

TEST(PcaWassersteinTest, UsesW1NotW2) {
  const data::Schema schema = TwoNumerics();
  // Encoded x: reference {0, 1}, candidate {0, 0}. The optimal matching
  // moves one point by 1: W1 = 1/2, whereas W2 = sqrt(1/2).
  const data::Table reference = MakePaperTable({{0, 5}, {10, 5}});
  const data::Table candidate = MakePaperTable({{0, 5}, {0, 5}});
  const auto result = PcaWassersteinScore(schema, candidate, reference, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NEAR(result->w1, 0.5, 1e-12);
  EXPECT_NEAR(result->score, 1.0 - 0.5 / std::sqrt(2.0), 1e-12);
}

TEST(PcaWassersteinTest, NormalisesBySqrtExplainedVarianceTimesDiameter) {
  const data::Schema schema = Build(
      data::Schema::Builder().AddNumeric("x", 0, 10).AddNumeric("y", 0, 10).AddNumeric("z", 0, 10));
  // A full factorial, so the covariance is diagonal: encoded x in {0, .5}
  // (variance .0625), y in {0, .2} (.01), z in {0, .1} (.0025). The top two
  // axes are x and y: v = .0725 / .075. The candidate is the reference moved
  // by +1 in x (+.1 encoded), along the first axis: W1 = .1 (a translation).
  std::vector<std::vector<double>> reference_rows, candidate_rows;
  for (double x : {0.0, 5.0}) {
    for (double y : {0.0, 2.0}) {
      for (double z : {0.0, 1.0}) {
        reference_rows.push_back({x, y, z});
        candidate_rows.push_back({x + 1, y, z});
      }
    }
  }
  const auto result =
      PcaWassersteinScore(schema, MakePaperTable(candidate_rows), MakePaperTable(reference_rows), {});
  ASSERT_TRUE(result.ok()) << result.status();
  const double v = 0.0725 / 0.075;
  EXPECT_NEAR(result->explained_variance_ratio, v, 1e-12);
  EXPECT_NEAR(result->w1, 0.1, 1e-12);
  EXPECT_NEAR(result->score, 1.0 - 0.1 / (std::sqrt(v) * std::sqrt(3.0)), 1e-12);
}

TEST(PcaWassersteinTest, OneHotBlocksCountTwiceInTheDiameter) {
  const data::Schema schema = Build(data::Schema::Builder()
                                        .AddNumeric("x", 0, 1)
                                        .AddCategorical("a", {"p", "q", "r"})
                                        .AddCategorical("b", {"p", "q"}));
  const data::Table t = MakePaperTable({{0, 0, 0}, {1, 1, 1}, {0.5, 2, 0}});
  const auto result = PcaWassersteinScore(schema, t, t, {});
  ASSERT_TRUE(result.ok());
  EXPECT_DOUBLE_EQ(result->diameter, std::sqrt(1.0 + 2 + 2));
  EXPECT_GT(result->explained_variance_ratio, 0.0);
  EXPECT_LE(result->explained_variance_ratio, 1.0);
}

// ---- dimension-wise prediction ----

TEST(DimensionWiseTest, ScoreHelpersMatchHandValues) {
  Eigen::VectorXi predicted(6), truth(6);
  predicted << 1, 1, 1, 0, 1, 0;
  truth << 1, 0, 0, 1, 1, 0;
  // Class 1: TP 2, FP 2, FN 1: F1 = 4 / 7. Class 0: TP 1, FP 1, FN 2: 2 / 5
  // (scoring the wrong class would show).
  EXPECT_DOUBLE_EQ(BinaryF1(predicted, truth, 1), 4.0 / 7.0);
  EXPECT_DOUBLE_EQ(BinaryF1(predicted, truth, 0), 2.0 / 5.0);
  Eigen::VectorXd yhat(3), y(3);
  yhat << 1, 2, 4;
  y << 1, 2, 3;  // SSE 1, SST 2.
  EXPECT_DOUBLE_EQ(RSquared(yhat, y), 0.5);
  EXPECT_DOUBLE_EQ(RSquared(y, y), 1.0);
}

// a determines b (b = a) and x = 10 a, so every column predicts every other.
data::Table Deterministic(int n, bool flip_b) {
  std::vector<std::vector<double>> rows;
  for (int i = 0; i < n; ++i) {
    const int a = (i * 7 + i / 3) % 2;
    rows.push_back({static_cast<double>(a), static_cast<double>(flip_b ? 1 - a : a),
                    10.0 * a + (i % 5) * 0.1, static_cast<double>(i % 3)});
  }
  return MakePaperTable(rows);
}

data::Schema DeterministicSchema() {
  return Build(data::Schema::Builder()
                   .AddCategorical("a", {"0", "1"})
                   .AddCategorical("b", {"0", "1"})
                   .AddNumeric("x", 0, 11)
                   .AddCategorical("noise", {"u", "v", "w"}));
}

TEST(DimensionWiseTest, RecoversADeterministicRelation) {
  const data::Schema schema = DeterministicSchema();
  const data::Table table = Deterministic(300, false);
  const auto result = DimensionWise(schema, table, table, {});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->columns.size(), 4u);
  EXPECT_EQ(result->columns[0].metric, "f1");
  EXPECT_EQ(result->columns[2].metric, "r2");
  EXPECT_EQ(result->columns[3].metric, "micro_f1");
  EXPECT_DOUBLE_EQ(result->columns[0].score, 1.0);
  EXPECT_DOUBLE_EQ(result->columns[1].score, 1.0);
  EXPECT_GT(result->columns[2].score, 0.99);
  EXPECT_GE(result->columns[3].score, 0.0);
  EXPECT_LE(result->columns[3].score, 1.0);
  EXPECT_EQ(result->train_rows, 300);
}

TEST(DimensionWiseTest, AReversedRelationScoresZero) {
  const data::Schema schema = DeterministicSchema();
  // Trained where b = 1 - a, tested where b = a: b is always predicted
  // wrong, so its F1 (of level 1) is 0.
  const auto result =
      DimensionWise(schema, Deterministic(300, true), Deterministic(300, false), {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_LT(result->columns[1].score, 0.05);
  EXPECT_LT(result->mean_score, 0.9);
}

TEST(DimensionWiseTest, OneLevelTrainingUsesTheConstantPredictor) {
  const data::Schema schema = DeterministicSchema();
  data::Table train = Deterministic(50, false);
  train.cells.col(1).setZero();  // b is always level 0.
  const auto result = DimensionWise(schema, train, Deterministic(50, false), {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->columns[1].constant_predictor);
  EXPECT_EQ(result->columns[1].score, 0.0);  // Level 1 never predicted.
}

TEST(DimensionWiseTest, SubsamplesToTheConfiguredRows) {
  const data::Schema schema = DeterministicSchema();
  PaperMetricsOptions options;
  options.prediction_train_rows = 100;
  options.prediction_test_rows = 40;
  const auto result =
      DimensionWise(schema, Deterministic(300, false), Deterministic(300, false), options);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->train_rows, 100);
  EXPECT_EQ(result->test_rows, 40);
}

// ---- shape checks ----

data::Schema AdultLike() {
  return Build(data::Schema::Builder()
                   .AddNumeric("hours-per-week", 1, 99, true)
                   .AddNumeric("capital-gain", 0, 99999, true)
                   .AddCategorical("education", {"HS", "Bachelors", "Masters"})
                   .AddNumeric("education-num", 1, 16, true)
                   .AddCategorical("relationship", {"Husband", "Wife"})
                   .AddCategorical("sex", {"Male", "Female"}));
}

TEST(ShapeChecksTest, PointMassesDependenciesAndImpossibleCells) {
  const data::Schema schema = AdultLike();
  // hours: 40 three times of four; gain: 0 twice (tie with nothing else:
  // 0 x2, 500 x1, 7000 x1); education <-> education-num one-to-one
  // (HS 9, Bachelors 13, Masters 14); relationship/sex: only
  // (Husband, Male) and (Wife, Female).
  const data::Table reference = MakePaperTable(
      {{40, 0, 0, 9, 0, 0}, {40, 0, 1, 13, 1, 1}, {40, 500, 2, 14, 0, 0}, {10, 7000, 0, 9, 1, 1}});
  // hours at 40: 2 of 4 (39 and 41 are not 40); gain at 0: 1 of 4;
  // education pairs agreeing: rows 0 and 1 (2 of 4); Husband & Female: row
  // 2 and 3 (2 of 4), and (Wife, Male) never.
  const data::Table candidate = MakePaperTable(
      {{40, 0, 0, 9, 0, 0}, {40, 10, 1, 13, 1, 1}, {39, 20, 2, 9, 0, 1}, {41, 30, 0, 13, 0, 1}});
  const ShapeChecks s = ComputeShapeChecks(schema, candidate, reference, {});
  ASSERT_EQ(s.point_masses.size(), 3u);
  EXPECT_EQ(s.point_masses[0].column, "hours-per-week");
  EXPECT_EQ(s.point_masses[0].value, 40);
  EXPECT_DOUBLE_EQ(s.point_masses[0].reference_share, 0.75);
  EXPECT_DOUBLE_EQ(s.point_masses[0].share, 0.5);
  EXPECT_EQ(s.point_masses[1].value, 0);
  EXPECT_DOUBLE_EQ(s.point_masses[1].reference_share, 0.5);
  EXPECT_DOUBLE_EQ(s.point_masses[1].share, 0.25);

  // One-to-one pairs of the reference: education <-> education-num, and
  // relationship <-> sex (Husband-Male, Wife-Female); not hours (40 maps to
  // two educations).
  ASSERT_EQ(s.dependencies.size(), 2u);
  EXPECT_EQ(s.dependencies[0].column_a, "education");
  EXPECT_EQ(s.dependencies[0].column_b, "education-num");
  EXPECT_EQ(s.dependencies[0].pairs, 3);
  EXPECT_DOUBLE_EQ(s.dependencies[0].agreement, 0.5);
  EXPECT_EQ(s.dependencies[1].column_a, "relationship");
  EXPECT_DOUBLE_EQ(s.dependencies[1].agreement, 0.5);

  // Categorical pairs with empty reference cells: education x relationship
  // (Bachelors-Husband and Masters-Wife empty), education x sex
  // (Bachelors-Male, Masters-Female), relationship x sex.
  ASSERT_EQ(s.impossible.size(), 3u);
  EXPECT_EQ(s.impossible[2].column_a, "relationship");
  EXPECT_EQ(s.impossible[2].empty_cells, 2);
  EXPECT_DOUBLE_EQ(s.impossible[2].share, 0.5);
  // education x relationship: Masters-Husband is seen; candidate row 1
  // (Bachelors, Wife) seen; rows 0, 2, 3 seen cells: share 0.
  EXPECT_EQ(s.impossible[0].column_a, "education");
  EXPECT_EQ(s.impossible[0].column_b, "relationship");
  EXPECT_EQ(s.impossible[0].empty_cells, 2);
  EXPECT_DOUBLE_EQ(s.impossible[0].share, 0.0);

  // Issue 17's named checks.
  ASSERT_EQ(s.named.size(), 4u);
  EXPECT_EQ(s.named[0].name, "hours-per-week = 40");
  EXPECT_DOUBLE_EQ(s.named[0].reference, 0.75);
  EXPECT_DOUBLE_EQ(s.named[0].value, 0.5);
  EXPECT_EQ(s.named[1].name, "capital-gain = 0");
  EXPECT_DOUBLE_EQ(s.named[1].value, 0.25);
  EXPECT_EQ(s.named[2].name, "education agrees with education-num");
  EXPECT_DOUBLE_EQ(s.named[2].reference, 1.0);
  EXPECT_DOUBLE_EQ(s.named[2].value, 0.5);
  EXPECT_EQ(s.named[3].name, "relationship = Husband and sex = Female");
  EXPECT_DOUBLE_EQ(s.named[3].reference, 0.0);
  EXPECT_DOUBLE_EQ(s.named[3].value, 0.5);
}

TEST(ShapeChecksTest, IdenticalTablesMatchTheReference) {
  const data::Schema schema = AdultLike();
  const data::Table t = MakePaperTable(
      {{40, 0, 0, 9, 0, 0}, {40, 0, 1, 13, 1, 1}, {40, 500, 2, 14, 0, 0}, {10, 7000, 0, 9, 1, 1}});
  const ShapeChecks s = ComputeShapeChecks(schema, t, t, {});
  for (const auto& p : s.point_masses) EXPECT_EQ(p.share, p.reference_share) << p.column;
  for (const auto& f : s.dependencies) EXPECT_EQ(f.agreement, 1.0) << f.column_a;
  for (const auto& c : s.impossible) EXPECT_EQ(c.share, 0.0) << c.column_a;
  for (const auto& n : s.named) EXPECT_EQ(n.value, n.reference) << n.name;
}

// ---- through the evaluator ----

TEST(PaperMetricsTest, EvaluatorReportsSyntheticAndRealRows) {
  const data::Schema schema = Build(data::Schema::Builder()
                                        .AddCategorical("a", {"0", "1"})
                                        .AddCategorical("b", {"0", "1"})
                                        .AddNumeric("x", 0, 11)
                                        .AddCategorical("noise", {"u", "v", "w"})
                                        .SetLabel("b"));
  const data::Table real = Deterministic(200, false);
  const data::Table synthetic = Deterministic(200, true);
  EvalOptions options;
  options.classifiers = {ClassifierKind::kLogisticRegression};
  const auto report = Evaluate(schema, synthetic, real, options, &real);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->paper_metrics.has_value());
  ASSERT_TRUE(report->real_train_paper_metrics.has_value());
  EXPECT_EQ(report->real_train_paper_metrics->three_way.mean_l1, 0.0);
  EXPECT_GT(report->paper_metrics->three_way.mean_l1, 0.5);
  EXPECT_NEAR(report->real_train_paper_metrics->pca_wasserstein.score, 1.0, 1e-9);
  EXPECT_LT(report->paper_metrics->pca_wasserstein.score, 1.0);
  EXPECT_GT(report->real_train_paper_metrics->dimension_wise->mean_score,
            report->paper_metrics->dimension_wise->mean_score);
  const std::string text =
      FormatPaperMetrics(*report->paper_metrics, &*report->real_train_paper_metrics);
  EXPECT_THAT(text, HasSubstr("dimension-wise prediction"));
  EXPECT_THAT(text, HasSubstr("3-way marginals"));
  EXPECT_THAT(text, HasSubstr("2-way PCA Wasserstein score"));
}

// Issue 38: a nullable numeric's missing cells (NaN) reach every metric of
// the evaluator as "missing", never as arithmetic: the scores are finite and
// identical tables still match exactly.
TEST(PaperMetricsTest, EvaluatorTakesNullableNumericsWithMissingCells) {
  const data::Schema schema = Build(data::Schema::Builder()
                                        .AddNumeric("x", 0, 10, false, /*nullable=*/true)
                                        .AddNumeric("z", 0, 20, true, /*nullable=*/true)
                                        .AddCategorical("c", {"u", "v"})
                                        .AddCategorical("y", {"no", "yes"})
                                        .SetLabel("y"));
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto table = [&](int rows, int missing_every) {
    data::Table t;
    t.cells.resize(rows, 4);
    for (int r = 0; r < rows; ++r) {
      const double x = (r * 7) % 11 * 0.9;
      t.cells(r, 0) = r % missing_every == 0 ? nan : x;
      t.cells(r, 1) = r % (missing_every + 1) == 1 ? nan : static_cast<double>(r % 21);
      t.cells(r, 2) = r % 2;
      t.cells(r, 3) = x > 4.5 ? 1 : 0;
    }
    return t;
  };
  const data::Table real = table(300, 3);
  const data::Table synthetic = table(300, 5);
  EvalOptions options;
  options.classifiers = {ClassifierKind::kLogisticRegression};
  const auto report = Evaluate(schema, synthetic, real, options, &real);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->paper_metrics.has_value());
  ASSERT_TRUE(report->real_train_paper_metrics.has_value());
  const PaperMetrics& same = *report->real_train_paper_metrics;
  EXPECT_EQ(same.three_way.mean_l1, 0.0);
  EXPECT_NEAR(same.pca_wasserstein.score, 1.0, 1e-9);
  const PaperMetrics& other = *report->paper_metrics;
  EXPECT_TRUE(std::isfinite(other.three_way.mean_l1));
  EXPECT_GT(other.three_way.mean_l1, 0.0);  // the missing shares differ
  EXPECT_TRUE(std::isfinite(other.pca_wasserstein.score));
  ASSERT_TRUE(other.dimension_wise.has_value());
  for (const auto& column : other.dimension_wise->columns) {
    EXPECT_TRUE(std::isfinite(column.score)) << column.column;
  }
  for (const auto& row : report->utility) {
    EXPECT_TRUE(std::isfinite(row.roc_auc)) << row.classifier;
  }
}

TEST(PaperMetricsTest, OptionsAreValidated) {
  PaperMetricsOptions options;
  options.marginal_bins = 0;
  EXPECT_THAT(options.Validate().message(), HasSubstr("Marginal bins"));
}

}  // namespace
}  // namespace dpcurator::eval
