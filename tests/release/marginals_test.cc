// The marginals release (core/release/marginals.h): limits, brute-force
// sensitivity on random neighbours under both relations, the noise's law,
// and Plan == Run's record.

#include "core/release/marginals.h"

#include <cmath>
#include <random>

#include "core/privacy/noise_source.h"
#include "gtest/gtest.h"

namespace dpcurator::release {
namespace {

using privacy::NeighbouringRelation;

data::Schema TestSchema() {
  data::Schema::Builder b;
  b.AddNumeric("hours", 1, 99, true)
      .SetAtoms("hours", {40})
      .SetBins("hours", {20, 40, 60})
      .AddCategorical("c", {"a", "b", "c"})
      .AddNumeric("x", 0.0, 1.0)
      .AddCategorical("y", {"n", "p"});
  return b.Build().value();
}

data::Table RandomTable(int rows, std::mt19937_64* rng) {
  std::uniform_int_distribution<int> hours(1, 99), c(0, 2), y(0, 1);
  std::uniform_real_distribution<double> x(0.0, 1.0);
  data::Table table;
  table.cells.resize(rows, 4);
  for (int r = 0; r < rows; ++r) {
    table.cells(r, 0) = (r % 3 == 0) ? 40 : hours(*rng);
    table.cells(r, 1) = c(*rng);
    table.cells(r, 2) = x(*rng);
    table.cells(r, 3) = y(*rng);
  }
  return table;
}

Eigen::VectorXd ExactConcatenation(const MarginalsKind::Params& params,
                                   const data::Schema& schema, const data::Table& table) {
  privacy::ZeroNoiseSource zero;
  auto result = MarginalsKind::Run(params, schema, table, NeighbouringRelation::kAddRemove, 1.0,
                                   &zero);
  EXPECT_TRUE(result.ok()) << result.status();
  int64_t total = 0;
  for (const auto& m : result->marginals) total += m.counts.size();
  Eigen::VectorXd all(total);
  int64_t offset = 0;
  for (const auto& m : result->marginals) {
    all.segment(offset, m.counts.size()) = m.counts;
    offset += m.counts.size();
  }
  return all;
}

TEST(MarginalsTest, ResolveChecksCliquesAgainstTheSchema) {
  const data::Schema schema = TestSchema();
  EXPECT_TRUE(MarginalsKind::Resolve({{{0}, {1, 3}, {0, 1, 2}}}, schema).ok());
  EXPECT_FALSE(MarginalsKind::Resolve({}, schema).ok());
  EXPECT_FALSE(MarginalsKind::Resolve({{{}}}, schema).ok());
  EXPECT_FALSE(MarginalsKind::Resolve({{{0, 0}}}, schema).ok());
  EXPECT_FALSE(MarginalsKind::Resolve({{{4}}}, schema).ok());
  EXPECT_FALSE(MarginalsKind::Resolve({{{0, 1, 2, 3}}}, schema).ok());
  // Cells per clique: a 256^2 x 2 table exceeds kMaxCellsPerClique.
  data::Schema::Builder wide;
  wide.AddNumeric("a", 0, 1).AddNumeric("b", 0, 1).AddCategorical("y", {"n", "p"});
  std::vector<double> edges;
  for (int i = 1; i < 256; ++i) edges.push_back(i / 256.0);
  wide.SetBins("a", edges).SetBins("b", edges);
  const data::Schema wide_schema = wide.Build().value();
  EXPECT_TRUE(MarginalsKind::Resolve({{{0, 1}}}, wide_schema).ok());
  auto too_big = MarginalsKind::Resolve({{{0, 1, 2}}}, wide_schema);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("coarser bins"), std::string::npos);
  // Total cells: 17 tables of 65536 cells exceed kMaxMarginalCells.
  MarginalsKind::Params many;
  for (int i = 0; i < 17; ++i) many.cliques.push_back({0, 1});
  EXPECT_FALSE(MarginalsKind::Resolve(many, wide_schema).ok());
}

TEST(MarginalsTest, BruteForceSensitivityOnRandomNeighbours) {
  const data::Schema schema = TestSchema();
  const MarginalsKind::Params params =
      MarginalsKind::Resolve({{{0}, {1}, {2}, {3}, {0, 3}, {1, 2}, {0, 1, 3}}}, schema).value();
  const double k = 7.0;
  EXPECT_DOUBLE_EQ(MarginalsKind::L2Sensitivity(params, NeighbouringRelation::kAddRemove),
                   std::sqrt(k));
  EXPECT_DOUBLE_EQ(MarginalsKind::L2Sensitivity(params, NeighbouringRelation::kReplaceOne),
                   std::sqrt(2 * k));
  std::mt19937_64 rng(11);
  double worst_add_remove = 0.0;
  double worst_replace = 0.0;
  for (int trial = 0; trial < 60; ++trial) {
    const data::Table table = RandomTable(30, &rng);
    const Eigen::VectorXd base = ExactConcatenation(params, schema, table);
    // ADD_REMOVE: drop a random row.
    const int drop = static_cast<int>(rng() % 30);
    data::Table removed;
    removed.cells.resize(29, 4);
    for (int r = 0, o = 0; r < 30; ++r) {
      if (r != drop) removed.cells.row(o++) = table.cells.row(r);
    }
    worst_add_remove = std::max(
        worst_add_remove, (base - ExactConcatenation(params, schema, removed)).squaredNorm());
    // REPLACE_ONE: replace a random row by a fresh one.
    data::Table replaced = table;
    replaced.cells.row(drop) = RandomTable(1, &rng).cells.row(0);
    worst_replace = std::max(worst_replace,
                             (base - ExactConcatenation(params, schema, replaced)).squaredNorm());
  }
  // The bounds hold and are attained (a removed row moves one cell per table;
  // a replaced row differing in every column moves two).
  EXPECT_DOUBLE_EQ(worst_add_remove, k);
  EXPECT_LE(worst_replace, 2 * k);
  EXPECT_GE(worst_replace, 2 * k - 4);  // attained up to a shared column, almost surely
}

TEST(MarginalsTest, PlanEqualsRunsRecord) {
  const data::Schema schema = TestSchema();
  const auto params = MarginalsKind::Resolve({{{0}, {1, 3}}}, schema).value();
  std::mt19937_64 rng(3);
  privacy::SeededNoiseSource noise(5);
  auto result = MarginalsKind::Run(params, schema, RandomTable(50, &rng),
                                   NeighbouringRelation::kAddRemove, 2.5, &noise);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->ran, MarginalsKind::Plan(params, 2.5));
  ASSERT_EQ(result->marginals.size(), 2u);
  EXPECT_EQ(result->marginals[1].shape, (std::vector<int>{3, 2}));
  EXPECT_EQ(result->marginals[1].counts.size(), 6);
}

TEST(MarginalsTest, NoiseHasTheCalibratedScale) {
  const data::Schema schema = TestSchema();
  const auto params = MarginalsKind::Resolve({{{0, 1}, {2, 3}, {1, 3}}}, schema).value();
  std::mt19937_64 rng(9);
  const data::Table table = RandomTable(200, &rng);
  const Eigen::VectorXd exact = ExactConcatenation(params, schema, table);
  privacy::SeededNoiseSource noise(17);
  const double s = 0.8;
  for (auto relation : {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    const double expected_std = s * MarginalsKind::L2Sensitivity(params, relation);
    double sum = 0.0, sum_sq = 0.0;
    int64_t n = 0;
    for (int draw = 0; draw < 400; ++draw) {
      auto result = MarginalsKind::Run(params, schema, table, relation, s, &noise);
      ASSERT_TRUE(result.ok());
      int64_t offset = 0;
      for (const auto& m : result->marginals) {
        EXPECT_NEAR(m.noise_std, expected_std, 1e-3 * expected_std);
        for (Eigen::Index i = 0; i < m.counts.size(); ++i) {
          const double e = m.counts[i] - exact[offset + i];
          sum += e;
          sum_sq += e * e;
          ++n;
        }
        offset += m.counts.size();
      }
    }
    const double mean = sum / n;
    const double std = std::sqrt(sum_sq / n - mean * mean);
    // n > 10^4 draws: the sample std is within 3% and the mean within
    // 5 standard errors.
    EXPECT_NEAR(std / expected_std, 1.0, 0.03);
    EXPECT_NEAR(mean, 0.0, 5 * expected_std / std::sqrt(static_cast<double>(n)));
  }
}

}  // namespace
}  // namespace dpcurator::release
