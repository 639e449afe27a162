#include "core/eval/fidelity.h"

#include "Eigen/Core"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

// age: numeric [0, 100]; color: {red, green, blue}; label: {no, yes}.
data::Schema TestSchema() {
  auto schema = data::Schema::Builder()
                    .AddNumeric("age", 0, 100)
                    .AddCategorical("color", {"red", "green", "blue"})
                    .AddCategorical("label", {"no", "yes"})
                    .SetLabel("label")
                    .Build();
  EXPECT_TRUE(schema.ok()) << schema.status();
  return *schema;
}

data::Table MakeTable(std::initializer_list<std::initializer_list<double>> rows) {
  data::Table table;
  table.cells.resize(rows.size(), rows.begin()->size());
  int i = 0;
  for (const auto& row : rows) {
    int j = 0;
    for (double v : row) table.cells(i, j++) = v;
    ++i;
  }
  return table;
}

TEST(FidelityTest, IdenticalTablesHaveZeroDistance) {
  const data::Schema schema = TestSchema();
  const data::Table table =
      MakeTable({{10, 0, 0}, {35, 1, 1}, {62, 2, 0}, {90, 1, 1}, {100, 0, 1}});
  const auto report = ComputeFidelity(schema, table, table);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->columns.size(), 3u);
  for (const ColumnFidelity& column : report->columns) {
    EXPECT_EQ(column.tv_distance, 0.0) << column.column;
  }
  EXPECT_EQ(report->mean_tv_distance, 0.0);
  EXPECT_EQ(report->max_tv_distance, 0.0);
  EXPECT_NEAR(report->correlation_mean_abs_difference, 0.0, 1e-12);
  // Encoded features: age + 3 color levels, all non-constant: 4 * 3 / 2 pairs.
  EXPECT_EQ(report->correlation_pairs, 6);
  EXPECT_EQ(report->constant_features_dropped, 0);
}

TEST(FidelityTest, DisjointTablesHaveDistanceOne) {
  const data::Schema schema = TestSchema();
  // Synthetic ages in the first 5-year bin, real ages in the last; colors and
  // labels disjoint too.
  const data::Table synthetic = MakeTable({{0, 0, 0}, {4.9, 1, 0}});
  const data::Table real = MakeTable({{95, 2, 1}, {100, 2, 1}});
  const auto report = ComputeFidelity(schema, synthetic, real);
  ASSERT_TRUE(report.ok()) << report.status();
  for (const ColumnFidelity& column : report->columns) {
    EXPECT_DOUBLE_EQ(column.tv_distance, 1.0) << column.column;
  }
  EXPECT_DOUBLE_EQ(report->mean_tv_distance, 1.0);
  EXPECT_DOUBLE_EQ(report->max_tv_distance, 1.0);
  EXPECT_EQ(report->max_tv_column, "age");  // First of the ties.
}

TEST(FidelityTest, PartialOverlapByHand) {
  const data::Schema schema = TestSchema();
  // color: synthetic (red, red, green, blue) -> (1/2, 1/4, 1/4);
  //        real      (red, green, green, green) -> (1/4, 3/4, 0).
  // TV = 1/2 (1/4 + 1/2 + 1/4) = 1/2.
  // age (bins of width 5): synthetic 12, 13, 14, 80 -> bin 2 x3, bin 16 x1;
  //   real 12, 50, 80, 81 -> bin 2, 10, 16, 16.
  //   TV = 1/2 (|3/4 - 1/4| + |0 - 1/4| + |1/4 - 1/2|) = 1/2.
  // label: synthetic (0, 0, 0, 1), real (0, 1, 1, 1): TV = 1/2.
  const data::Table synthetic = MakeTable({{12, 0, 0}, {13, 0, 0}, {14, 1, 0}, {80, 2, 1}});
  const data::Table real = MakeTable({{12, 0, 0}, {50, 1, 1}, {80, 1, 1}, {81, 1, 1}});
  const auto report = ComputeFidelity(schema, synthetic, real);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_DOUBLE_EQ(report->columns[0].tv_distance, 0.5);
  EXPECT_DOUBLE_EQ(report->columns[1].tv_distance, 0.5);
  EXPECT_DOUBLE_EQ(report->columns[2].tv_distance, 0.5);
  EXPECT_FALSE(report->columns[0].categorical);
  EXPECT_TRUE(report->columns[1].categorical);

  FidelityOptions options;
  options.include_label = false;
  const auto without_label = ComputeFidelity(schema, synthetic, real, options);
  ASSERT_TRUE(without_label.ok());
  EXPECT_EQ(without_label->columns.size(), 2u);
}

TEST(FidelityTest, ColumnHistogramEdges) {
  const data::Schema schema = TestSchema();
  // Width 5: 0 -> bin 0, 4.999 -> bin 0, 5 -> bin 1, 100 (upper) -> bin 19.
  const data::Table table = MakeTable({{0, 0, 0}, {4.999, 0, 0}, {5, 0, 0}, {100, 0, 0}});
  const Eigen::VectorXd h = ColumnHistogram(schema, table, 0, 20);
  ASSERT_EQ(h.size(), 20);
  EXPECT_DOUBLE_EQ(h(0), 0.5);
  EXPECT_DOUBLE_EQ(h(1), 0.25);
  EXPECT_DOUBLE_EQ(h(19), 0.25);
}

TEST(FidelityTest, CorrelationDifferenceByHandAndConstantColumns) {
  // a: columns x and y = x (corr 1) and a constant column.
  // b: columns x and y = -x (corr -1) and a non-constant column.
  // The constant column is dropped; one pair remains, |1 - (-1)| = 2.
  Eigen::MatrixXd a(4, 3), b(4, 3);
  a << 0, 0, 1,  //
      1, 1, 1,   //
      2, 2, 1,   //
      3, 3, 1;
  b << 0, 3, 0,  //
      1, 2, 1,   //
      2, 1, 0,   //
      3, 0, 1;
  const auto difference = CorrelationMeanAbsDifference(a, b);
  ASSERT_TRUE(difference.ok());
  EXPECT_EQ(difference->pairs, 1);
  EXPECT_EQ(difference->constant_features_dropped, 1);
  EXPECT_NEAR(difference->mean_abs_difference, 2.0, 1e-12);

  // Nothing left to compare: 0 pairs, no NaN.
  const auto none = CorrelationMeanAbsDifference(Eigen::MatrixXd::Ones(3, 2),
                                                 Eigen::MatrixXd::Ones(5, 2));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->pairs, 0);
  EXPECT_EQ(none->mean_abs_difference, 0.0);
  EXPECT_FALSE(CorrelationMeanAbsDifference(a, b.leftCols(2)).ok());
}

TEST(FidelityTest, RejectsTablesThatDoNotMatchTheSchema) {
  const data::Schema schema = TestSchema();
  const data::Table good = MakeTable({{10, 0, 0}});
  EXPECT_THAT(ComputeFidelity(schema, MakeTable({{10, 0}}), good).status().message(),
              HasSubstr("synthetic table has 2 columns but the schema declares 3"));
  EXPECT_THAT(ComputeFidelity(schema, good, MakeTable({{10, 3, 0}})).status().message(),
              HasSubstr("real table has level 3 in row 0, column 'color'"));
  EXPECT_THAT(ComputeFidelity(schema, MakeTable({{101, 0, 0}}), good).status().message(),
              HasSubstr("outside the declared bounds [0, 100]"));
  EXPECT_THAT(ComputeFidelity(schema, MakeTable({{10, 0.5, 0}}), good).status().message(),
              HasSubstr("level 0.5"));
  data::Table empty;
  empty.cells.resize(0, 3);
  EXPECT_THAT(ComputeFidelity(schema, empty, good).status().message(), HasSubstr("no rows"));
  FidelityOptions options;
  options.numeric_bins = 0;
  EXPECT_THAT(ComputeFidelity(schema, good, good, options).status().message(),
              HasSubstr("Numeric bins must be a positive integer"));
}

}  // namespace
}  // namespace dpcurator::eval
