// The marginals release (core/release/marginals.h): limits, brute-force
// sensitivity on random neighbours under both relations, the noise's law,
// and Plan == Run's record; the bin-fit grid and its post-processing
// (core/release/bin_fit.h).

#include "core/release/marginals.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/privacy/noise_source.h"
#include "core/release/bin_fit.h"
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

// Issue 38: the bin-fit release is the marginals release over FitGridSchema.
namespace fit {

data::Schema MoneySchema() {
  data::Schema::Builder b;
  b.AddNumeric("income", 0, 1e9)
      .SetAtoms("income", {0})
      .AddNumeric("age", 18, 100, /*integer=*/true)
      .AddNumeric("pnl", -1e6, 1e6)
      .AddCategorical("y", {"n", "p"})
      .AddAlias("y", "p.", "p")
      .SetMissingTokens({"", "NA"})
      .SetLabel("y");
  return b.Build().value();
}

data::Table MoneyTable(int rows, std::mt19937_64* rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> age(18, 100), y(0, 1);
  data::Table table;
  table.cells.resize(rows, 4);
  for (int r = 0; r < rows; ++r) {
    table.cells(r, 0) = r % 10 == 0 ? 0.0 : std::exp(10.0 + 1.5 * normal(*rng));
    table.cells(r, 1) = age(*rng);
    const double z = normal(*rng);
    table.cells(r, 2) = (z < 0 ? -1 : 1) * std::min(1e6, std::exp(5.0 + 2.0 * std::fabs(z)));
    table.cells(r, 3) = y(*rng);
  }
  return table;
}

// The grid depends on the bounds only, is valid as bins, is fine on a log
// scale for bounds spanning decades and equal-width everywhere.
TEST(FitBinsTest, GridIsFixedByTheBoundsAndFineOnBothScales) {
  const data::Schema schema = MoneySchema();
  const std::vector<double> money = FitGridEdges(schema.column(0));
  ASSERT_LE(money.size(), 256u);
  for (size_t i = 1; i < money.size(); ++i) {
    ASSERT_LT(money[i - 1], money[i]);
    // Above 1,000 (six decades under 1e9) no cell is wider than a factor
    // 1.25 or than 1/128 of the range.
    if (money[i - 1] >= 1000) {
      EXPECT_LE(money[i], std::max(1.25 * money[i - 1], money[i - 1] + 1e9 / 128 + 1)) << i;
    }
  }
  EXPECT_GT(money.front(), 0.0);
  EXPECT_LT(money.front(), 1000.0 * 1.25);
  const std::vector<double> age = FitGridEdges(schema.column(1));
  EXPECT_GE(age.size(), 127u);
  EXPECT_GT(age.front(), 18.0);
  EXPECT_LT(age.back(), 100.0);
  const std::vector<double> pnl = FitGridEdges(schema.column(2));
  EXPECT_TRUE(std::binary_search(pnl.begin(), pnl.end(), 0.0));
  EXPECT_TRUE(std::binary_search(pnl.begin(), pnl.end(), -1.0));  // -1e6 x 10^-6
  auto grid = FitGridSchema(schema, {0, 1, 2});
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->column(0).bins, money);
  EXPECT_EQ(grid->column(0).atoms, std::vector<double>{0.0});
  EXPECT_EQ(grid->label_index(), schema.label_index());
  EXPECT_EQ(grid->column(3).aliases, schema.column(3).aliases);
  EXPECT_EQ(grid->missing_tokens(), schema.missing_tokens());
  EXPECT_FALSE(FitGridSchema(schema, {3}).ok());  // categorical
  EXPECT_FALSE(FitGridSchema(schema, {4}).ok());  // no such column
}

// Brute force on random neighbours: the fit release's 1-way tables over the
// fine grid move by at most sqrt(k) in L2 under ADD_REMOVE (sqrt(2k) under
// REPLACE_ONE), the marginals release's bound, whatever the grid.
TEST(FitBinsTest, BruteForceSensitivityOnRandomNeighbours) {
  const data::Schema grid = FitGridSchema(MoneySchema(), {0, 1, 2}).value();
  const MarginalsKind::Params params =
      MarginalsKind::Resolve({{{0}, {1}, {2}}}, grid).value();
  const double k = 3.0;
  EXPECT_DOUBLE_EQ(MarginalsKind::L2Sensitivity(params, NeighbouringRelation::kAddRemove),
                   std::sqrt(k));
  std::mt19937_64 rng(38);
  double worst_add_remove = 0.0;
  double worst_replace = 0.0;
  for (int trial = 0; trial < 60; ++trial) {
    const data::Table table = MoneyTable(40, &rng);
    const Eigen::VectorXd base = ExactConcatenation(params, grid, table);
    const int drop = static_cast<int>(rng() % 40);
    data::Table removed;
    removed.cells.resize(39, 4);
    for (int r = 0, o = 0; r < 40; ++r) {
      if (r != drop) removed.cells.row(o++) = table.cells.row(r);
    }
    worst_add_remove = std::max(worst_add_remove,
                                (base - ExactConcatenation(params, grid, removed)).squaredNorm());
    data::Table replaced = table;
    replaced.cells.row(drop) = MoneyTable(1, &rng).cells.row(0);
    worst_replace =
        std::max(worst_replace, (base - ExactConcatenation(params, grid, replaced)).squaredNorm());
  }
  EXPECT_DOUBLE_EQ(worst_add_remove, k);
  EXPECT_LE(worst_replace, 2 * k);
}

// The largest share of `values` in one bin of [lower, e_1), ..., [e_m, upper].
double FullestShare(std::vector<double> values, double lower, const std::vector<double>& edges) {
  std::vector<int64_t> counts(edges.size() + 1, 0);
  for (double v : values) {
    if (v < lower) continue;
    ++counts[std::upper_bound(edges.begin(), edges.end(), v) - edges.begin()];
  }
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) /
         static_cast<double>(values.size());
}

// The post-processing: 16 bins from a noisy release at a noise multiplier
// of 5 (epsilon near 1) spread a lognormal money column (2,000 rows, 10%
// zeros in the atom) to at most 15% of its non-zero rows per bin, where the
// default 16 equal-width bins put 99% in one; edges are round (2 significant
// digits) and the suggested bounds bracket the bulk. Without the log part of
// the grid the mass sits in one grid cell and the edges fail.
TEST(FitBinsTest, NoisyCountsGiveRoundEdgesThatSpreadAHeavyTail) {
  const data::Schema grid = FitGridSchema(MoneySchema(), {0, 1, 2}).value();
  const MarginalsKind::Params params =
      MarginalsKind::Resolve({{{0}, {1}, {2}}}, grid).value();
  std::mt19937_64 rng(7);
  const data::Table table = MoneyTable(2000, &rng);
  privacy::SeededNoiseSource noise(38);
  auto result =
      MarginalsKind::Run(params, grid, table, NeighbouringRelation::kAddRemove, 5.0, &noise);
  ASSERT_TRUE(result.ok()) << result.status();
  const FittedBins money = FitBinsFromNoisyCounts(grid.column(0), result->marginals[0].counts,
                                                 result->marginals[0].noise_std, 16);
  std::vector<double> positive;
  for (int r = 0; r < 2000; ++r) {
    if (table.cells(r, 0) > 0) positive.push_back(table.cells(r, 0));
  }
  ASSERT_GE(money.edges.size(), 12u);
  // As `schema fit` writes them: with the tail edges beyond the fitted ones
  // (the 4-sigma threshold drops the thinnest tail cells; issue 38).
  EXPECT_LE(FullestShare(positive, 0.0, WithTailEdges(grid.column(0), money.edges)), 0.15);
  std::vector<double> uniform;
  for (int b = 1; b < 16; ++b) uniform.push_back(b * 1e9 / 16);
  EXPECT_GT(FullestShare(positive, 0.0, uniform), 0.95);
  for (double edge : money.edges) {
    const double scale = std::pow(10.0, std::floor(std::log10(edge)) - 1);
    EXPECT_NEAR(edge / scale, std::round(edge / scale), 1e-6) << edge;
  }
  // The 99.5% quantile of e^(10 + 1.5 z) is about 1.1e6; cells under 4
  // sigma are dropped, so the suggestion falls short of it (180,000 here).
  EXPECT_GT(money.upper, 1e5);
  EXPECT_LT(money.upper, 5e6);
  EXPECT_GT(money.upper, money.edges.back());
  // Integer column: whole-number edges inside the bounds.
  const FittedBins age = FitBinsFromNoisyCounts(grid.column(1), result->marginals[1].counts,
                                               result->marginals[1].noise_std, 8);
  ASSERT_FALSE(age.edges.empty());
  for (double edge : age.edges) {
    EXPECT_EQ(edge, std::round(edge));
    EXPECT_GT(edge, 18);
    EXPECT_LT(edge, 100);
  }
  // Signed heavy tail: edges on both sides of 0.
  const FittedBins pnl = FitBinsFromNoisyCounts(grid.column(2), result->marginals[2].counts,
                                               result->marginals[2].noise_std, 8);
  ASSERT_GE(pnl.edges.size(), 4u);
  EXPECT_LT(pnl.edges.front(), 0.0);
  EXPECT_GT(pnl.edges.back(), 0.0);
  // Counts all at or below 0 (clipped): nothing to fit, declared bounds kept.
  const FittedBins none = FitBinsFromNoisyCounts(
      grid.column(0), -Eigen::VectorXd::Ones(result->marginals[0].counts.size()), 0.0, 16);
  EXPECT_TRUE(none.edges.empty());
  EXPECT_EQ(none.upper, 1e9);
}

// Tail edges (issue 38): beyond the fitted edges, geometric edges a factor
// sqrt(10) apart to the declared bounds, towards 0 no finer than the grid's
// M x 1e-6; round, strictly inside, sorted; none added to an empty fit.
TEST(FitBinsTest, TailEdgesReachTheBoundsGeometrically) {
  data::Column money;
  money.name = "money";
  money.lower = 0;
  money.upper = 1e9;
  const std::vector<double> bulk = {13000, 20000, 31000, 48000, 93000};
  const std::vector<double> edges = WithTailEdges(money, bulk);
  // Above 93000: 290000, 930000, ..., 930000000 (8); below 13000: 4100,
  // 1300 (the next, 410, is under 1e9 x 1e-6 = 1000, then -1000 < 0).
  EXPECT_EQ(edges, (std::vector<double>{1300, 4100, 13000, 20000, 31000, 48000, 93000, 290000,
                                        930000, 2900000, 9300000, 29000000, 93000000,
                                        290000000, 930000000}));
  EXPECT_TRUE(WithTailEdges(money, {}).empty());
  // Signed bounds: downwards through 0 to the negative bound.
  data::Column pnl = money;
  pnl.lower = -1e6;
  pnl.upper = 1e6;
  const std::vector<double> signed_edges = WithTailEdges(pnl, {10, 100});
  ASSERT_FALSE(signed_edges.empty());
  EXPECT_LT(signed_edges.front(), -1e5);
  EXPECT_GT(signed_edges.front(), -1e6);
  EXPECT_GT(signed_edges.back(), 1e5);
  EXPECT_LT(signed_edges.back(), 1e6);
  EXPECT_TRUE(std::is_sorted(signed_edges.begin(), signed_edges.end()));
  EXPECT_EQ(std::adjacent_find(signed_edges.begin(), signed_edges.end()), signed_edges.end());
  // Integer column: whole numbers.
  data::Column age = money;
  age.integer = true;
  age.lower = 0;
  age.upper = 120;
  for (double edge : WithTailEdges(age, {30, 40})) EXPECT_EQ(edge, std::round(edge)) << edge;
}

}  // namespace fit

}  // namespace
}  // namespace dpcurator::release
