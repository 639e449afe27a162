#include "core/eval/binary_metrics.h"

#include <string>

#include "core/data/binary_demo.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

// A 120-feature stand-in: features share hidden conditions, so many are
// predictable from the others.
struct Fixture {
  data::BinaryDemoNetwork network = data::MakeBinaryDemoNetwork(120, 3);
  data::Schema schema = data::BinaryDemoSchema(120);
  data::Table train = data::GenerateBinaryDemoTable(network, 6000, 1);
  data::Table test = data::GenerateBinaryDemoTable(network, 6000, 2);
};

// Each column permuted on its own: the same prevalences, no dependence.
data::Table Independent(const data::Table& table, uint64_t seed) {
  PublicRng rng(seed);
  data::Table out = table;
  for (Eigen::Index j = 0; j < out.cells.cols(); ++j) {
    for (Eigen::Index i = out.cells.rows() - 1; i > 0; --i) {
      const auto k = static_cast<Eigen::Index>(rng.UniformInt(static_cast<uint64_t>(i + 1)));
      std::swap(out.cells(i, j), out.cells(k, j));
    }
  }
  return out;
}

TEST(BinaryMetricsTest, ProbabilityOfIdenticalTablesLiesOnTheDiagonal) {
  Fixture f;
  absl::StatusOr<DiagonalScatter> scatter = DimensionWiseProbability(f.schema, f.train, f.train);
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  ASSERT_EQ(scatter->points.size(), 120u);
  EXPECT_EQ(scatter->mean_abs_gap, 0.0);
  EXPECT_NEAR(scatter->correlation, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(scatter->points[3].real, f.train.cells.col(3).mean());
}

TEST(BinaryMetricsTest, ProbabilityFindsTheColumnThatWasChanged) {
  Fixture f;
  data::Table synthetic = f.train;
  synthetic.cells.col(7).setOnes();
  absl::StatusOr<DiagonalScatter> scatter = DimensionWiseProbability(f.schema, f.train, synthetic);
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  EXPECT_EQ(scatter->worst_column, "d0008");
  EXPECT_NEAR(scatter->max_abs_gap, 1.0 - f.train.cells.col(7).mean(), 1e-12);
}

TEST(BinaryMetricsTest, ProbabilityNeedsBinaryColumns) {
  data::Schema::Builder builder;
  builder.AddNumeric("x", 0, 1);
  const data::Schema schema = *builder.Build();
  data::Table table;
  table.cells = Eigen::MatrixXd::Zero(3, 1);
  EXPECT_EQ(DimensionWiseProbability(schema, table, table).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Rows with the dependence keep the real AUROCs; rows with each column
// shuffled (same marginals, no dependence) fall to chance.
TEST(BinaryMetricsTest, AurocSeparatesDependentFromIndependentRows) {
  Fixture f;
  DimensionWiseAurocOptions options;
  options.max_targets = 10;
  options.train_rows = 2500;
  options.test_rows = 2500;
  const data::Table fresh = data::GenerateBinaryDemoTable(f.network, 6000, 9);
  absl::StatusOr<DimensionWiseAuroc> same =
      DimensionWiseAurocOf(f.schema, f.train, fresh, f.test, options);
  ASSERT_TRUE(same.ok()) << same.status();
  ASSERT_GE(same->scatter.points.size(), 6u);
  double mean_real = 0.0;
  for (const auto& p : same->scatter.points) mean_real += p.real;
  mean_real /= static_cast<double>(same->scatter.points.size());
  EXPECT_GT(mean_real, 0.6) << "mean real-trained AUROC";
  EXPECT_LT(same->scatter.mean_abs_gap, 0.05);

  absl::StatusOr<DimensionWiseAuroc> independent =
      DimensionWiseAurocOf(f.schema, f.train, Independent(fresh, 4), f.test, options);
  ASSERT_TRUE(independent.ok()) << independent.status();
  double mean_synthetic = 0.0;
  for (const auto& p : independent->scatter.points) mean_synthetic += p.synthetic;
  mean_synthetic /= static_cast<double>(independent->scatter.points.size());
  EXPECT_LT(mean_synthetic, mean_real - 0.05);
  EXPECT_GT(independent->scatter.mean_abs_gap, 0.05);
}

TEST(BinaryMetricsTest, AurocDropsColumnsConstantInTheSyntheticRows) {
  Fixture f;
  data::Table synthetic = data::GenerateBinaryDemoTable(f.network, 6000, 9);
  synthetic.cells.col(0).setZero();
  synthetic.cells.col(1).setZero();
  DimensionWiseAurocOptions options;
  options.max_targets = 3;
  options.min_test_class_rows = 1;
  absl::StatusOr<DimensionWiseAuroc> result =
      DimensionWiseAurocOf(f.schema, f.train, synthetic, f.test, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->constant_in_synthetic, (std::vector<std::string>{"d0001", "d0002"}));
  EXPECT_EQ(result->scatter.points.size(), 3u);
  for (const auto& p : result->scatter.points) {
    EXPECT_NE(p.column, "d0001");
    EXPECT_NE(p.column, "d0002");
  }
}

TEST(BinaryMetricsTest, ScatterSvgHasOnePointPerFeatureAndEscapesNames) {
  DiagonalScatter scatter;
  scatter.points = {{"a<b", 0.1, 0.2}, {"c", 0.5, 0.4}, {"d", 0.9, 0.95}};
  const std::string svg = DiagonalScatterSvg(scatter, "t & u", "real", "synthetic", 0.0, 1.0);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
  size_t circles = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1)) {
    ++circles;
  }
  EXPECT_EQ(circles, 3u);
  EXPECT_NE(svg.find("a&lt;b"), std::string::npos);
  EXPECT_NE(svg.find("t &amp; u"), std::string::npos);
  EXPECT_EQ(svg.find("a<b"), std::string::npos);
}

}  // namespace
}  // namespace dpcurator::eval
