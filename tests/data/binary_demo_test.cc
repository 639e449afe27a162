#include "core/data/binary_demo.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace dpcurator::data {
namespace {

TEST(BinaryDemoTest, SchemaHasTheBinaryFeaturesOfThePaper) {
  const Schema schema = BinaryDemoSchema();
  ASSERT_EQ(schema.num_columns(), 1071);
  EXPECT_EQ(schema.column(0).name, "d0001");
  EXPECT_EQ(schema.column(1070).name, "d1071");
  for (const Column& column : schema.columns()) {
    ASSERT_EQ(column.type, ColumnType::kCategorical);
    ASSERT_EQ(column.categories, (std::vector<std::string>{"0", "1"}));
  }
}

TEST(BinaryDemoTest, RowsAreReproducibleFromTheSeedAndBinary) {
  const BinaryDemoNetwork network = MakeBinaryDemoNetwork();
  const Table a = GenerateBinaryDemoTable(network, 300, 7);
  const Table b = GenerateBinaryDemoTable(network, 300, 7);
  const Table c = GenerateBinaryDemoTable(network, 300, 8);
  EXPECT_EQ(a.cells, b.cells);
  EXPECT_NE(a.cells, c.cells);
  EXPECT_TRUE(((a.cells.array() == 0.0) || (a.cells.array() == 1.0)).all());
}

// Features without a feature parent whose condition parents are distinct:
// the noisy-OR gives P(x = 1) = 1 - (1 - leak) prod_l (1 - pi_l w_l) exactly,
// since the conditions are independent. The sampler must agree within
// Monte Carlo error (5 standard errors).
TEST(BinaryDemoTest, PrevalencesFollowTheNoisyOrModel) {
  const BinaryDemoNetwork network = MakeBinaryDemoNetwork(60, 99);
  constexpr int64_t kRows = 100000;
  const Table table = GenerateBinaryDemoTable(network, kRows, 5);
  int checked = 0;
  for (int j = 0; j < network.num_features(); ++j) {
    if (network.feature_parent[j].first >= 0) continue;
    std::map<int, double> off_by_condition;  // Condition -> P(no switch-on | c = 1).
    for (const auto& [l, w] : network.condition_parents[j]) {
      auto [it, inserted] = off_by_condition.emplace(l, 1.0);
      it->second *= 1.0 - w;
    }
    double off = 1.0 - network.leak[j];
    for (const auto& [l, off_if_on] : off_by_condition) {
      const double pi = network.condition_prevalence[l];
      off *= (1.0 - pi) + pi * off_if_on;
    }
    const double expected = 1.0 - off;
    const double observed = table.cells.col(j).mean();
    const double se = std::sqrt(expected * (1.0 - expected) / kRows);
    EXPECT_NEAR(observed, expected, 5.0 * se + 1e-6) << "feature " << j;
    ++checked;
  }
  EXPECT_GT(checked, 30);
}

// Like diagnosis codes: most features rare, a few common, and features that
// share a condition correlated (so each is partly predictable from others).
TEST(BinaryDemoTest, PrevalencesAreHeavyTailedAndFeaturesCorrelated) {
  const BinaryDemoNetwork network = MakeBinaryDemoNetwork();
  const Table table = GenerateBinaryDemoTable(network, 10000, 11);
  std::vector<double> prevalence(network.num_features());
  for (int j = 0; j < network.num_features(); ++j) prevalence[j] = table.cells.col(j).mean();
  std::vector<double> sorted = prevalence;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_LT(sorted[sorted.size() / 2], 0.05);  // Median feature is rare.
  EXPECT_GT(sorted.back(), 0.2);               // Some are common.
  EXPECT_GT(sorted.front(), 0.0);              // None is empty at 10k rows.
  // Two hubs of one condition co-occur far above independence.
  int a = -1, b = -1;
  for (int j = 0; j < network.num_features() && b < 0; ++j) {
    for (int k = 0; k < j; ++k) {
      if (network.condition_parents[j][0].first == network.condition_parents[k][0].first &&
          network.condition_parents[j][0].second > 0.6 &&
          network.condition_parents[k][0].second > 0.6) {
        a = k;
        b = j;
        break;
      }
    }
  }
  ASSERT_GE(b, 0) << "the network should have two hubs of one condition";
  const double joint = (table.cells.col(a).array() * table.cells.col(b).array()).mean();
  EXPECT_GT(joint, 2.0 * prevalence[a] * prevalence[b]);
}

}  // namespace
}  // namespace dpcurator::data
