// PEARL's auxiliary release, the DP mean pairwise distance (App. D;
// pearl.md 1.2 A), with this project's two estimators. Brute-force checks of
// the sensitivities of docs/privacy.md on random neighbouring datasets
// (duplicates and out-of-domain rows included), adversarial neighbours that
// attain each bound, and the blocked Gram-matrix sum against a naive loop.

#include "core/embed/pairwise_distance.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "Eigen/Core"
#include "core/privacy/noise_source.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"
#include "tests/pearl/test_util.h"

namespace dpcurator::embed {
namespace {

using pearl_testing::MakeLayout;
using pearl_testing::OppositeRow;
using pearl_testing::RandomEncodedRow;
using pearl_testing::RandomEncodedRows;
using pearl_testing::WithoutRow;
using pearl_testing::WithRowAt;
using privacy::NeighbouringRelation;

constexpr double kSlack = 1e-9;

double NaiveMean(const Eigen::MatrixXd& rows, double diameter) {
  double sum = 0.0;
  for (Eigen::Index i = 0; i < rows.rows(); ++i)
    for (Eigen::Index j = i + 1; j < rows.rows(); ++j)
      sum += std::min((rows.row(i) - rows.row(j)).norm(), diameter);
  const double n = static_cast<double>(rows.rows());
  return sum / (n * (n - 1) / 2);
}

DistanceStatistic Chain(const Eigen::MatrixXd& rows, double diameter, uint64_t seed) {
  auto accumulator =
      ChainDistanceAccumulator::Create(static_cast<int>(rows.cols()), diameter, seed).value();
  EXPECT_TRUE(accumulator.Add(rows).ok());
  return accumulator.Finish();
}

// The released vector with zero noise, through the production path.
Eigen::VectorXd Released(const DistanceStatistic& statistic, DistanceEstimator estimator,
                         NeighbouringRelation relation, double diameter, int64_t public_n) {
  privacy::ZeroNoiseSource zero;
  return ReleaseMeanDistance(statistic, estimator, relation, diameter, 1.0, public_n, &zero)
      .value()
      .values;
}

Eigen::VectorXd ChainRelease(const Eigen::MatrixXd& rows, double diameter, uint64_t seed,
                             NeighbouringRelation relation) {
  return Released(Chain(rows, diameter, seed), DistanceEstimator::kHashChain, relation, diameter,
                  relation == NeighbouringRelation::kReplaceOne ? rows.rows() : 0);
}

Eigen::VectorXd AllPairsRelease(const Eigen::MatrixXd& rows, double diameter,
                                NeighbouringRelation relation, int64_t public_n) {
  return Released(AllPairsDistanceSum(rows, diameter, /*block_rows=*/5).value(),
                  DistanceEstimator::kAllPairs, relation, diameter, public_n);
}

// A random dataset drawn from a small pool (many duplicate rows), with a
// few out-of-domain rows that the clamping must absorb.
Eigen::MatrixXd RandomDataset(const data::FeatureLayout& layout, int n, PublicRng* rng) {
  const Eigen::MatrixXd pool = RandomEncodedRows(layout, 4, rng, /*corner=*/0.5);
  Eigen::MatrixXd rows(n, layout.total_dim());
  for (int i = 0; i < n; ++i) {
    const double u = rng->Uniform();
    if (u < 0.4) {
      rows.row(i) = pool.row(rng->UniformInt(4));
    } else if (u < 0.95) {
      rows.row(i) = RandomEncodedRow(layout, rng, /*corner=*/0.5);
    } else {
      rows.row(i).setConstant(rng->Uniform() < 0.5 ? -7.0 : 9.0);
      rows(i, 0) = std::numeric_limits<double>::quiet_NaN();
    }
  }
  return rows;
}

Eigen::RowVectorXd RandomNewRow(const data::FeatureLayout& layout, const Eigen::MatrixXd& rows,
                                PublicRng* rng) {
  if (rows.rows() > 0 && rng->Uniform() < 0.3) return rows.row(rng->UniformInt(rows.rows()));
  return RandomEncodedRow(layout, rng, /*corner=*/0.5);
}

TEST(PairwiseDistanceTest, DiameterOfTheEncodedDomain) {
  const auto layout = MakeLayout(3, {4, 2});
  const double diameter = EncodedRowDiameter(layout);
  EXPECT_DOUBLE_EQ(diameter, std::sqrt(3.0 + 2.0 * 2.0));
  PublicRng rng(1);
  double largest = 0.0;
  for (int trial = 0; trial < 2000; ++trial) {
    const auto a = RandomEncodedRow(layout, &rng, 0.5);
    const auto b = RandomEncodedRow(layout, &rng, 0.5);
    largest = std::max(largest, (a - b).norm());
    EXPECT_LE((a - b).norm(), diameter + 1e-15);
  }
  // Attained by opposite corners.
  Eigen::RowVectorXd a = RandomEncodedRow(layout, &rng, /*corner=*/1.0);
  EXPECT_NEAR((a - OppositeRow(layout, a)).norm(), diameter, 1e-15);
}

TEST(PairwiseDistanceTest, BlockedAllPairsEqualsNaiveDoubleLoop) {
  PublicRng rng(2);
  const auto layout = MakeLayout(4, {3, 5, 2});
  const double diameter = EncodedRowDiameter(layout);
  Eigen::MatrixXd rows = RandomEncodedRows(layout, 57, &rng);
  rows.row(10) = rows.row(3);  // duplicates give distance 0, not sqrt(eps)
  rows.row(40) = rows.row(3);
  const double naive = NaiveMean(rows, diameter);
  for (const int64_t block : {1, 7, 16, 56, 57, 1024}) {
    const auto statistic = AllPairsDistanceSum(rows, diameter, block).value();
    EXPECT_EQ(statistic.num_pairs, 57 * 56 / 2);
    EXPECT_EQ(statistic.num_rows, 57);
    EXPECT_NEAR(statistic.distance_sum / statistic.num_pairs, naive, 1e-12 * naive)
        << "block " << block;
  }
  EXPECT_EQ(AllPairsDistanceSum(rows.topRows(1), diameter).value().num_pairs, 0);
  EXPECT_FALSE(AllPairsDistanceSum(rows, diameter, 0).ok());
  EXPECT_FALSE(AllPairsDistanceSum(rows, -1.0).ok());
}

TEST(PairwiseDistanceTest, ChainIgnoresStorageOrderAndShards) {
  PublicRng rng(3);
  const auto layout = MakeLayout(2, {3, 3});
  const double diameter = EncodedRowDiameter(layout);
  const Eigen::MatrixXd rows = RandomDataset(layout, 80, &rng);
  const auto reference = Chain(rows, diameter, 99);
  EXPECT_EQ(reference.num_pairs, 79);
  EXPECT_EQ(reference.num_rows, 80);
  // A shuffled copy, split into three shards merged in another order.
  std::vector<int> order(80);
  std::iota(order.begin(), order.end(), 0);
  for (int i = 79; i > 0; --i) std::swap(order[i], order[rng.UniformInt(i + 1)]);
  Eigen::MatrixXd shuffled(80, rows.cols());
  for (int i = 0; i < 80; ++i) shuffled.row(i) = rows.row(order[i]);
  auto make = [&] { return ChainDistanceAccumulator::Create(rows.cols(), diameter, 99).value(); };
  auto a = make(), b = make(), c = make();
  ASSERT_TRUE(a.Add(shuffled.topRows(30)).ok());
  ASSERT_TRUE(b.Add(shuffled.middleRows(30, 25)).ok());
  ASSERT_TRUE(c.Add(shuffled.bottomRows(25)).ok());
  ASSERT_TRUE(c.Merge(a).ok());
  ASSERT_TRUE(c.Merge(b).ok());
  const auto merged = c.Finish();
  EXPECT_EQ(merged.distance_sum, reference.distance_sum);  // bit-identical
  EXPECT_EQ(merged.num_pairs, reference.num_pairs);
  // Another seed is another order.
  EXPECT_NE(Chain(rows, diameter, 100).distance_sum, reference.distance_sum);
  auto other = ChainDistanceAccumulator::Create(rows.cols(), diameter, 100).value();
  EXPECT_FALSE(c.Merge(other).ok());
  EXPECT_FALSE(c.Add(rows.leftCols(2)).ok());
}

// Over public seeds the chain's mean is an unbiased estimate of the all-pairs
// mean; duplicates are scattered like any rows (an order that grouped them
// would be biased towards 0 on categorical data).
TEST(PairwiseDistanceTest, ChainMeanIsUnbiasedEvenWithDuplicates) {
  PublicRng rng(4);
  const auto layout = MakeLayout(0, {3, 2});  // 6 distinct rows only
  const double diameter = EncodedRowDiameter(layout);
  const Eigen::MatrixXd rows = RandomEncodedRows(layout, 60, &rng);
  const double exact = NaiveMean(rows, diameter);
  double average = 0.0;
  const int seeds = 3000;
  for (int seed = 0; seed < seeds; ++seed) {
    const auto statistic = Chain(rows, diameter, seed);
    average += statistic.distance_sum / statistic.num_pairs / seeds;
  }
  // Sd of one chain mean ~ 0.1 here, so of the average ~ 2e-3.
  EXPECT_NEAR(average, exact, 0.01) << "exact " << exact;
}

TEST(PairwiseDistanceTest, ChainSensitivityByBruteForce) {
  PublicRng rng(5);
  double worst_add_remove = 0.0;
  double worst_replace = 0.0;
  for (int trial = 0; trial < 3000; ++trial) {
    const auto layout = MakeLayout(static_cast<int>(rng.UniformInt(3)), {2, 3});
    const double diameter = EncodedRowDiameter(layout);
    const uint64_t seed = rng.NextU64();
    const int n = static_cast<int>(rng.UniformInt(14));
    const Eigen::MatrixXd rows = RandomDataset(layout, n, &rng);
    const Eigen::RowVectorXd x = RandomNewRow(layout, rows, &rng);
    // ADD_REMOVE: insert x anywhere in storage order.
    const Eigen::MatrixXd more = WithRowAt(rows, x, rng.UniformInt(n + 1));
    const double bound =
        DistanceSensitivity(DistanceEstimator::kHashChain, NeighbouringRelation::kAddRemove,
                            diameter, 0)
            .value();
    EXPECT_DOUBLE_EQ(bound, std::sqrt(2.0) * diameter);
    const double moved = (ChainRelease(rows, diameter, seed, NeighbouringRelation::kAddRemove) -
                          ChainRelease(more, diameter, seed, NeighbouringRelation::kAddRemove))
                             .norm();
    EXPECT_LE(moved, bound + kSlack) << "trial " << trial;
    worst_add_remove = std::max(worst_add_remove, moved / bound);
    // REPLACE_ONE: replace one row by x (n >= 2 public).
    if (n >= 2) {
      Eigen::MatrixXd replaced = rows;
      replaced.row(rng.UniformInt(n)) = x;
      const double replace_bound =
          DistanceSensitivity(DistanceEstimator::kHashChain, NeighbouringRelation::kReplaceOne,
                              diameter, n)
              .value();
      EXPECT_DOUBLE_EQ(replace_bound, 2.0 * diameter / (n - 1));
      const double moved_replace =
          (ChainRelease(rows, diameter, seed, NeighbouringRelation::kReplaceOne) -
           ChainRelease(replaced, diameter, seed, NeighbouringRelation::kReplaceOne))
              .norm();
      EXPECT_LE(moved_replace, replace_bound + kSlack) << "trial " << trial;
      worst_replace = std::max(worst_replace, moved_replace / replace_bound);
    }
  }
  RecordProperty("worst_add_remove_ratio", std::to_string(worst_add_remove));
  RecordProperty("worst_replace_ratio", std::to_string(worst_replace));
  EXPECT_GT(worst_add_remove, 0.5);
  EXPECT_GT(worst_replace, 0.4);
}

// Two copies of a corner row a, and the opposite row x falling between them
// in the keyed order (searched over public seeds): adding x moves
// [S - diam E ; diam E] by (diam, diam), exactly sqrt(2) diam; replacing x
// by a in {a, a, x} moves S/(n-1) by 2 diam/(n-1) = diam.
TEST(PairwiseDistanceTest, ChainBoundsAreAttained) {
  const auto layout = MakeLayout(3, {4, 2});
  const double diameter = EncodedRowDiameter(layout);
  PublicRng rng(6);
  const Eigen::RowVectorXd a = RandomEncodedRow(layout, &rng, /*corner=*/1.0);
  const Eigen::RowVectorXd x = OppositeRow(layout, a);
  Eigen::MatrixXd pair(2, a.size());
  pair << a, a;
  const Eigen::MatrixXd triple = WithRowAt(pair, x, 1);
  bool found = false;
  for (uint64_t seed = 0; seed < 200 && !found; ++seed) {
    // x is between the copies iff the chain of {a, a, x} sums 2 diam.
    if (std::abs(Chain(triple, diameter, seed).distance_sum - 2 * diameter) > 1e-12) continue;
    found = true;
    const double moved = (ChainRelease(pair, diameter, seed, NeighbouringRelation::kAddRemove) -
                          ChainRelease(triple, diameter, seed, NeighbouringRelation::kAddRemove))
                             .norm();
    EXPECT_NEAR(moved, std::sqrt(2.0) * diameter, 1e-12);
    Eigen::MatrixXd all_a(3, a.size());
    all_a << a, a, a;
    const double moved_replace =
        (ChainRelease(triple, diameter, seed, NeighbouringRelation::kReplaceOne) -
         ChainRelease(all_a, diameter, seed, NeighbouringRelation::kReplaceOne))
            .norm();
    EXPECT_NEAR(moved_replace,
                DistanceSensitivity(DistanceEstimator::kHashChain,
                                    NeighbouringRelation::kReplaceOne, diameter, 3)
                    .value(),
                1e-12);
  }
  EXPECT_TRUE(found);
}

TEST(PairwiseDistanceTest, AllPairsSensitivityByBruteForce) {
  PublicRng rng(7);
  double worst_add_remove = 0.0;
  double worst_replace = 0.0;
  for (int trial = 0; trial < 1500; ++trial) {
    const auto layout = MakeLayout(static_cast<int>(rng.UniformInt(3)), {2, 3});
    const double diameter = EncodedRowDiameter(layout);
    const int n_min = 2 + static_cast<int>(rng.UniformInt(8));
    const int n = static_cast<int>(rng.UniformInt(16));  // below and above n_min
    const Eigen::MatrixXd rows = RandomDataset(layout, n, &rng);
    const Eigen::RowVectorXd x = RandomNewRow(layout, rows, &rng);
    const Eigen::MatrixXd more = WithRowAt(rows, x, rng.UniformInt(n + 1));
    const double bound = DistanceSensitivity(DistanceEstimator::kAllPairs,
                                             NeighbouringRelation::kAddRemove, diameter, n_min)
                             .value();
    EXPECT_DOUBLE_EQ(bound, 2.0 * diameter / n_min);
    const double moved =
        (AllPairsRelease(rows, diameter, NeighbouringRelation::kAddRemove, n_min) -
         AllPairsRelease(more, diameter, NeighbouringRelation::kAddRemove, n_min))
            .norm();
    EXPECT_LE(moved, bound + kSlack) << "trial " << trial << " n " << n << " n_min " << n_min;
    worst_add_remove = std::max(worst_add_remove, moved / bound);
    if (n >= 2) {
      Eigen::MatrixXd replaced = rows;
      replaced.row(rng.UniformInt(n)) = x;
      const double replace_bound = DistanceSensitivity(
          DistanceEstimator::kAllPairs, NeighbouringRelation::kReplaceOne, diameter, n).value();
      EXPECT_DOUBLE_EQ(replace_bound, 2.0 * diameter / n);
      const double moved_replace =
          (AllPairsRelease(rows, diameter, NeighbouringRelation::kReplaceOne, n) -
           AllPairsRelease(replaced, diameter, NeighbouringRelation::kReplaceOne, n))
              .norm();
      EXPECT_LE(moved_replace, replace_bound + kSlack) << "trial " << trial;
      worst_replace = std::max(worst_replace, moved_replace / replace_bound);
    }
  }
  RecordProperty("worst_add_remove_ratio", std::to_string(worst_add_remove));
  RecordProperty("worst_replace_ratio", std::to_string(worst_replace));
  EXPECT_GT(worst_add_remove, 0.3);
  EXPECT_GT(worst_replace, 0.3);
}

// All rows equal to a corner row a, one neighbour at the opposite corner:
// REPLACE_ONE moves the mean by exactly 2 diam/n (PEARL App. D with our
// diameter); ADD_REMOVE from n_min - 1 to n_min rows by exactly 2 diam/n_min.
TEST(PairwiseDistanceTest, AllPairsBoundsAreAttained) {
  const auto layout = MakeLayout(2, {3, 2, 5});
  const double diameter = EncodedRowDiameter(layout);
  PublicRng rng(8);
  const Eigen::RowVectorXd a = RandomEncodedRow(layout, &rng, /*corner=*/1.0);
  const Eigen::RowVectorXd x = OppositeRow(layout, a);
  const int n = 9;
  const Eigen::MatrixXd same = a.replicate(n, 1);
  Eigen::MatrixXd replaced = same;
  replaced.row(4) = x;
  EXPECT_NEAR((AllPairsRelease(same, diameter, NeighbouringRelation::kReplaceOne, n) -
               AllPairsRelease(replaced, diameter, NeighbouringRelation::kReplaceOne, n))
                  .norm(),
              2.0 * diameter / n, 1e-12);
  const int n_min = 10;
  const Eigen::MatrixXd more = WithRowAt(same, x, 3);
  EXPECT_NEAR((AllPairsRelease(same, diameter, NeighbouringRelation::kAddRemove, n_min) -
               AllPairsRelease(more, diameter, NeighbouringRelation::kAddRemove, n_min))
                  .norm(),
              2.0 * diameter / n_min, 1e-12);
}

TEST(PairwiseDistanceTest, ReleaseNoiseAndPostProcessing) {
  PublicRng rng(9);
  const auto layout = MakeLayout(3, {3, 4});
  const double diameter = EncodedRowDiameter(layout);
  const Eigen::MatrixXd rows = RandomEncodedRows(layout, 40, &rng);
  const double exact = NaiveMean(rows, diameter);
  const auto chain = Chain(rows, diameter, 5);
  const auto all_pairs = AllPairsDistanceSum(rows, diameter).value();
  privacy::ZeroNoiseSource zero;
  // Zero noise: every estimator and relation decodes to its own mean.
  for (const auto relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    const auto r = ReleaseMeanDistance(chain, DistanceEstimator::kHashChain, relation, diameter,
                                       2.0, 40, &zero)
                       .value();
    EXPECT_NEAR(NoisyMeanDistance(r), chain.distance_sum / 39, 1e-12);
    EXPECT_DOUBLE_EQ(r.noise_stddev, 2.0 * r.sensitivity);
    const auto p = ReleaseMeanDistance(all_pairs, DistanceEstimator::kAllPairs, relation,
                                       diameter, 2.0, 40, &zero)
                       .value();
    EXPECT_NEAR(NoisyMeanDistance(p), exact, 1e-12);
  }
  // Misuse is refused: wrong estimator, replace-one with the wrong n, n < 2.
  EXPECT_FALSE(ReleaseMeanDistance(chain, DistanceEstimator::kAllPairs,
                                   NeighbouringRelation::kReplaceOne, diameter, 1.0, 40, &zero)
                   .ok());
  EXPECT_FALSE(ReleaseMeanDistance(chain, DistanceEstimator::kHashChain,
                                   NeighbouringRelation::kReplaceOne, diameter, 1.0, 41, &zero)
                   .ok());
  EXPECT_FALSE(ReleaseMeanDistance(all_pairs, DistanceEstimator::kAllPairs,
                                   NeighbouringRelation::kAddRemove, diameter, 1.0, 1, &zero)
                   .ok());
  EXPECT_FALSE(ReleaseMeanDistance(chain, DistanceEstimator::kHashChain,
                                   NeighbouringRelation::kAddRemove, diameter, 0.0, 0, &zero)
                   .ok());
  // With noise: the empirical std of each released coordinate is s * Delta.
  privacy::SeededNoiseSource seeded(10);
  const int draws = 4000;
  Eigen::MatrixXd values(draws, 2);
  for (int t = 0; t < draws; ++t) {
    values.row(t) = ReleaseMeanDistance(chain, DistanceEstimator::kHashChain,
                                        NeighbouringRelation::kAddRemove, diameter, 3.0, 0,
                                        &seeded)
                        .value()
                        .values.transpose();
  }
  const double expected_std = 3.0 * std::sqrt(2.0) * diameter;
  for (int c = 0; c < 2; ++c) {
    const double mean = values.col(c).mean();
    const double std = std::sqrt((values.col(c).array() - mean).square().mean());
    EXPECT_NEAR(std / expected_std, 1.0, 0.05);
  }
  // Length-scale: floor 5% of diam, cap diam, NaN to the floor.
  EXPECT_DOUBLE_EQ(LengthScaleFromMeanDistance(-3.0, diameter), 0.05 * diameter);
  EXPECT_DOUBLE_EQ(LengthScaleFromMeanDistance(1e9, diameter), diameter);
  EXPECT_DOUBLE_EQ(LengthScaleFromMeanDistance(std::nan(""), diameter), 0.05 * diameter);
  EXPECT_DOUBLE_EQ(LengthScaleFromMeanDistance(0.5 * diameter, diameter), 0.5 * diameter);
  // Chain, ADD_REMOVE, noisy count below one edge: floored, finite.
  NoisyDistanceStatistic tiny;
  tiny.diameter = diameter;
  tiny.values = Eigen::Vector2d(0.3, -5.0);
  EXPECT_TRUE(std::isfinite(NoisyMeanDistance(tiny)));
}

}  // namespace
}  // namespace dpcurator::embed
