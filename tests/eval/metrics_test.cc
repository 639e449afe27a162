#include "core/eval/metrics.h"

#include "Eigen/Core"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dpcurator::eval {
namespace {

using ::testing::HasSubstr;

Eigen::VectorXd Vec(std::initializer_list<double> values) {
  Eigen::VectorXd v(values.size());
  int i = 0;
  for (double x : values) v(i++) = x;
  return v;
}

Eigen::VectorXi Ints(std::initializer_list<int> values) {
  Eigen::VectorXi v(values.size());
  int i = 0;
  for (int x : values) v(i++) = x;
  return v;
}

TEST(RocAucTest, NoTies) {
  // Positives score 0.35 and 0.8, negatives 0.1 and 0.4. Of the 4
  // (positive, negative) pairs the positive ranks higher in 3
  // (0.35 > 0.1, 0.8 > 0.1, 0.8 > 0.4): AUC = 3 / 4.
  const auto auc = RocAuc(Vec({0.1, 0.4, 0.35, 0.8}), Ints({0, 0, 1, 1}));
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_DOUBLE_EQ(*auc, 0.75);
}

TEST(RocAucTest, TiesCountHalf) {
  // Positives 0.5, 0.2, 0.9; negatives 0.5, 0.5. Pairs (6):
  //   0.5 vs 0.5, 0.5 vs 0.5: ties, 1/2 each -> 1
  //   0.2 vs both: lost -> 0
  //   0.9 vs both: won -> 2
  // AUC = 3 / 6 = 0.5.
  const auto auc = RocAuc(Vec({0.5, 0.5, 0.5, 0.2, 0.9}), Ints({1, 0, 0, 1, 1}));
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_DOUBLE_EQ(*auc, 0.5);

  // Positives 0.3, 0.3; negatives 0.3, 0.1. Pairs: two ties (1/2 each) and
  // two wins over 0.1: AUC = (1 + 2) / 4 = 0.75.
  const auto auc2 = RocAuc(Vec({0.3, 0.3, 0.3, 0.1}), Ints({1, 1, 0, 0}));
  ASSERT_TRUE(auc2.ok());
  EXPECT_DOUBLE_EQ(*auc2, 0.75);
}

TEST(RocAucTest, ConstantScoresGiveOneHalf) {
  const auto auc = RocAuc(Vec({0.2, 0.2, 0.2, 0.2}), Ints({1, 0, 0, 1}));
  ASSERT_TRUE(auc.ok());
  EXPECT_DOUBLE_EQ(*auc, 0.5);
}

TEST(RocAucTest, OtherPositiveLabel) {
  // Positive = label 0: positives 0.1, 0.4 vs negatives 0.35, 0.8 -> only
  // 0.4 > 0.35 wins: AUC = 1 / 4.
  const auto auc = RocAuc(Vec({0.1, 0.4, 0.35, 0.8}), Ints({0, 0, 1, 1}), 0);
  ASSERT_TRUE(auc.ok());
  EXPECT_DOUBLE_EQ(*auc, 0.25);
}

TEST(RocAucTest, UndefinedWithOneClass) {
  EXPECT_THAT(RocAuc(Vec({0.1, 0.2}), Ints({0, 0})).status().message(),
              HasSubstr("no row has the positive label"));
  EXPECT_THAT(RocAuc(Vec({0.1, 0.2}), Ints({1, 1})).status().message(),
              HasSubstr("every row is positive"));
  EXPECT_FALSE(RocAuc(Vec({0.1}), Ints({0, 1})).ok());
}

TEST(AveragePrecisionTest, NoTies) {
  // Descending: 0.8 (+), 0.4 (-), 0.35 (+), 0.1 (-). P = 2 positives.
  //   after 0.8:  recall 1/2, precision 1/1 -> (1/2 - 0) * 1   = 1/2
  //   after 0.4:  recall 1/2                 -> 0
  //   after 0.35: recall 1,   precision 2/3 -> (1 - 1/2) * 2/3 = 1/3
  //   after 0.1:  recall 1                   -> 0
  // AP = 5/6.
  const auto ap = AveragePrecision(Vec({0.1, 0.4, 0.35, 0.8}), Ints({0, 0, 1, 1}));
  ASSERT_TRUE(ap.ok()) << ap.status();
  EXPECT_DOUBLE_EQ(*ap, 5.0 / 6.0);
}

TEST(AveragePrecisionTest, TiedScoresEnterTogether) {
  // Descending groups: {0.9: +}, {0.5: +, -, -}, {0.2: +}. P = 3.
  //   after 0.9: recall 1/3, precision 1/1 -> 1/3
  //   after 0.5: recall 2/3, precision 2/4 -> 1/3 * 1/2 = 1/6
  //   after 0.2: recall 1,   precision 3/5 -> 1/3 * 3/5 = 1/5
  // AP = 1/3 + 1/6 + 1/5 = 7/10.
  const auto ap = AveragePrecision(Vec({0.5, 0.5, 0.5, 0.2, 0.9}), Ints({1, 0, 0, 1, 1}));
  ASSERT_TRUE(ap.ok()) << ap.status();
  EXPECT_DOUBLE_EQ(*ap, 0.7);
}

TEST(AveragePrecisionTest, ConstantScoresGivePrevalence) {
  // One group: recall 1, precision 1/4.
  const auto ap = AveragePrecision(Vec({0.3, 0.3, 0.3, 0.3}), Ints({0, 1, 0, 0}));
  ASSERT_TRUE(ap.ok());
  EXPECT_DOUBLE_EQ(*ap, 0.25);
}

TEST(AveragePrecisionTest, UndefinedWithoutPositives) {
  EXPECT_THAT(AveragePrecision(Vec({0.1, 0.2}), Ints({0, 0})).status().message(),
              HasSubstr("Average precision is undefined"));
}

// Rows (label: scores for classes 0, 1, 2):
//   0: 0.7 0.2 0.1      arg-max 0
//   1: 0.2 0.5 0.3      arg-max 1
//   2: 0.3 0.3 0.4      arg-max 2
//   0: 0.3 0.5 0.2      arg-max 1
Eigen::MatrixXd ThreeClassScores() {
  Eigen::MatrixXd s(4, 3);
  s << 0.7, 0.2, 0.1,  //
      0.2, 0.5, 0.3,   //
      0.3, 0.3, 0.4,   //
      0.3, 0.5, 0.2;
  return s;
}

TEST(MulticlassMetricsTest, MacroRocAucByHand) {
  // Class 0: positives 0.7, 0.3 vs negatives 0.2, 0.3:
  //   0.7 wins twice, 0.3 beats 0.2 and ties 0.3 -> 3.5 / 4 = 7/8.
  // Class 1: positive 0.5 vs 0.2, 0.3, 0.5 -> 2.5 / 3 = 5/6.
  // Class 2: positive 0.4 vs 0.1, 0.3, 0.2 -> 3 / 3 = 1.
  // Macro = (7/8 + 5/6 + 1) / 3 = 65/72.
  const auto auc = MacroRocAuc(ThreeClassScores(), Ints({0, 1, 2, 0}));
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_NEAR(*auc, 65.0 / 72.0, 1e-15);
}

TEST(MulticlassMetricsTest, AccuracyAndMacroF1ByHand) {
  // Predictions 0, 1, 2, 1 for labels 0, 1, 2, 0: 3 of 4 right.
  // Class 0: TP 1, FN 1      -> F1 = 2/(2+1)   = 2/3
  // Class 1: TP 1, FP 1      -> F1 = 2/(2+1)   = 2/3
  // Class 2: TP 1            -> F1 = 1
  // Macro F1 = (2/3 + 2/3 + 1) / 3 = 7/9.
  const Eigen::VectorXi labels = Ints({0, 1, 2, 0});
  EXPECT_DOUBLE_EQ(*Accuracy(ThreeClassScores(), labels), 0.75);
  EXPECT_NEAR(*MacroF1(ThreeClassScores(), labels), 7.0 / 9.0, 1e-15);
}

TEST(MulticlassMetricsTest, MacroSkipsClassesAbsentFromLabels) {
  // Labels only 0 and 1: class 2 is skipped.
  // Class 0: positives (rows 0, 2) 0.7, 0.3 vs negatives (rows 1, 3) 0.2, 0.3
  //   -> 3.5 / 4 = 7/8. Class 1: positives 0.5, 0.5 vs 0.2, 0.3 -> 1.
  const auto auc = MacroRocAuc(ThreeClassScores(), Ints({0, 1, 0, 1}));
  ASSERT_TRUE(auc.ok());
  EXPECT_DOUBLE_EQ(*auc, (7.0 / 8.0 + 1.0) / 2.0);
  EXPECT_THAT(MacroRocAuc(ThreeClassScores(), Ints({2, 2, 2, 2})).status().message(),
              HasSubstr("need at least 2"));
}

TEST(MulticlassMetricsTest, BinaryMacroEqualsBinaryAuc) {
  Eigen::MatrixXd s(4, 2);
  s << 0.9, 0.1, 0.6, 0.4, 0.65, 0.35, 0.2, 0.8;
  const Eigen::VectorXi labels = Ints({0, 0, 1, 1});
  EXPECT_DOUBLE_EQ(*MacroRocAuc(s, labels), *RocAuc(s.col(1), labels));
}

TEST(MulticlassMetricsTest, ArgMaxTakesLowestIndexOnTies) {
  Eigen::MatrixXd s(2, 3);
  s << 0.4, 0.4, 0.2, 0.1, 0.45, 0.45;
  EXPECT_EQ(ArgMax(s), Ints({0, 1}));
}

TEST(MulticlassMetricsTest, RejectsBadLabels) {
  EXPECT_THAT(Accuracy(ThreeClassScores(), Ints({0, 1, 3, 0})).status().message(),
              HasSubstr("outside [0, 3)"));
  EXPECT_FALSE(MacroF1(ThreeClassScores(), Ints({0, 1})).ok());
}

}  // namespace
}  // namespace dpcurator::eval
