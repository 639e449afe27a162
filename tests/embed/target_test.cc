// ToEmbeddingTarget (post-processing of a release into the trainer's target,
// dp-merf.md 1.3 eq. 12 and pitfall 3), and the noise-level arithmetic that
// docs/privacy.md 2.3 quotes for the one-event design.

#include <cmath>

#include "core/embed/labelled_embedding.h"
#include "core/privacy/calibration.h"
#include "core/privacy/noise_source.h"
#include "core/util/public_rng.h"
#include "gtest/gtest.h"

namespace dpcurator::embed {
namespace {

using privacy::NeighbouringRelation;

NoisyLabelledEmbedding Release(NeighbouringRelation relation, Eigen::MatrixXd values,
                               Eigen::VectorXd totals, int64_t public_n = 0) {
  NoisyLabelledEmbedding r;
  r.relation = relation;
  r.class_values = std::move(values);
  r.class_totals = std::move(totals);
  r.public_n = public_n;
  return r;
}

TEST(EmbeddingTargetTest, AddRemoveClampsNegativeAndSmallCountsToOneRow) {
  Eigen::MatrixXd values(2, 3);
  values << 4, -2, 10,  //
      6, 8, 20;
  // Noisy counts: negative, ordinary, below one row.
  const auto target = ToEmbeddingTarget(
      Release(NeighbouringRelation::kAddRemove, values, Eigen::Vector3d(-5, 100, 0.3)));
  EXPECT_EQ(target.clamped_classes, 2);
  // floor = max(1, 1e-3 * 95.3) = 1: clamped totals (1, 100, 1).
  EXPECT_NEAR(target.class_weights(0), 1.0 / 102, 1e-15);
  EXPECT_NEAR(target.class_weights(1), 100.0 / 102, 1e-15);
  EXPECT_NEAR(target.class_weights(2), 1.0 / 102, 1e-15);
  Eigen::MatrixXd expected(2, 3);
  expected << 4, -0.02, 10,  //
      6, 0.08, 20;
  EXPECT_LE((target.class_means - expected).cwiseAbs().maxCoeff(), 1e-15);
}

TEST(EmbeddingTargetTest, AddRemoveFloorGrowsWithTheTotal) {
  // Total 1e6: floor 1e-3 * total = 1000 (a class with 500 noisy rows is
  // clamped up to 1000).
  const auto target = ToEmbeddingTarget(Release(
      NeighbouringRelation::kAddRemove, Eigen::MatrixXd::Ones(1, 2), Eigen::Vector2d(999500, 500)));
  EXPECT_EQ(target.clamped_classes, 1);
  EXPECT_NEAR(target.class_means(0, 1), 1.0 / 1000, 1e-18);
  EXPECT_NEAR(target.class_weights(1), 1000.0 / 1000500, 1e-15);
}

TEST(EmbeddingTargetTest, ReplaceOneFloorIsOneRowOrOnePermille) {
  Eigen::MatrixXd values(1, 3);
  values << 0.3, 0.2, -0.001;
  // n = 500: floor max(1e-3, 1/500) = 0.002.
  const auto target = ToEmbeddingTarget(Release(NeighbouringRelation::kReplaceOne, values,
                                                Eigen::Vector3d(0.6, 0.41, -0.01), 500));
  EXPECT_EQ(target.clamped_classes, 1);
  EXPECT_NEAR(target.class_weights.sum(), 1.0, 1e-15);
  EXPECT_NEAR(target.class_weights(2), 0.002 / 1.012, 1e-15);
  EXPECT_NEAR(target.class_means(0, 0), 0.5, 1e-15);
  EXPECT_NEAR(target.class_means(0, 2), -0.5, 1e-15);
  // Large n: the floor is 1e-3.
  const auto big = ToEmbeddingTarget(Release(NeighbouringRelation::kReplaceOne, values,
                                             Eigen::Vector3d(0.6, 0.41, 0.0005), 100000));
  EXPECT_NEAR(big.class_means(0, 2), -1.0, 1e-12);
}

// Random noisy releases: weights positive and sum to 1; every mean is the
// released value divided by the clamped total; clamped_classes counts them.
TEST(EmbeddingTargetTest, PropertiesOnRandomReleases) {
  PublicRng rng(21);
  for (int trial = 0; trial < 500; ++trial) {
    const int classes = 2 + static_cast<int>(rng.UniformInt(5));
    const bool add_remove = trial % 2 == 0;
    const int64_t n = 1 + static_cast<int64_t>(rng.UniformInt(5000));
    Eigen::MatrixXd values(7, classes);
    rng.FillNormal(values);
    Eigen::VectorXd totals(classes);
    for (int c = 0; c < classes; ++c)
      totals(c) = add_remove ? 50 * rng.Normal() + 20 : 0.3 * rng.Normal() + 0.1;
    const auto release = Release(add_remove ? NeighbouringRelation::kAddRemove
                                            : NeighbouringRelation::kReplaceOne,
                                 values, totals, add_remove ? 0 : n);
    const auto target = ToEmbeddingTarget(release);
    ASSERT_EQ(target.class_weights.size(), classes);
    EXPECT_GT(target.class_weights.minCoeff(), 0.0);
    EXPECT_NEAR(target.class_weights.sum(), 1.0, 1e-12);
    const double floor =
        add_remove ? std::max(1.0, 1e-3 * std::max(totals.sum(), 0.0))
                   : std::max(1e-3, 1.0 / static_cast<double>(n));
    int clamped = 0;
    for (int c = 0; c < classes; ++c) {
      const double used = std::max(totals(c), floor);
      clamped += totals(c) < floor;
      EXPECT_LE((target.class_means.col(c) - values.col(c) / used).cwiseAbs().maxCoeff(), 1e-12);
    }
    EXPECT_EQ(target.clamped_classes, clamped);
  }
}

// With zero noise the target is exactly the class-conditional mean embedding
// and the class frequencies, under both relations.
TEST(EmbeddingTargetTest, NoiselessTargetIsConditionalMeansAndFrequencies) {
  LabelledEmbeddingAccumulator acc(2, 2);
  Eigen::MatrixXd features(5, 2);
  features << 1, 0, 0, 1, 0.6, 0.8, -1, 0, 0, -1;
  Eigen::VectorXi labels(5);
  labels << 0, 0, 1, 1, 1;
  ASSERT_TRUE(acc.Add(features, labels).ok());
  privacy::ZeroNoiseSource zero;
  for (auto relation : {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    const auto target =
        ToEmbeddingTarget(ReleaseLabelledEmbedding(acc, relation, 1.0, 5, &zero).value());
    EXPECT_EQ(target.clamped_classes, 0);
    EXPECT_NEAR(target.class_weights(0), 0.4, 1e-15);
    EXPECT_NEAR(target.class_means(0, 0), 0.5, 1e-15);
    EXPECT_NEAR(target.class_means(1, 0), 0.5, 1e-15);
    EXPECT_NEAR(target.class_means(0, 1), -0.4 / 3, 1e-15);
    EXPECT_NEAR(target.class_means(1, 1), -0.2 / 3, 1e-15);
  }
}

// docs/privacy.md 2.3: one Gaussian event on the joint vector needs
// s = 3.7306 at (eps, delta) = (1, 1e-5) (Balle & Wang 2018, the accountant's
// exact conversion); charging C + 1 separate Gaussians as DP-MERF does
// needs sqrt(C + 1) times more with the same exact accountant, and the
// paper's own route (classic RDP conversion, k = C + 1) 6.93 / 8.49 / 12.0.
TEST(OneEventDesignTest, NoiseMultipliersQuotedInTheDocs) {
  const double one = privacy::CalibrateGaussianNoiseMultiplier(1, 1.0, 1e-5).value();
  EXPECT_NEAR(one, 3.73063, 1e-3);
  EXPECT_GE(one, 3.73063);
  privacy::CalibrationOptions rdp_only;
  rdp_only.conversion.use_exact_gaussian = false;
  const double one_rdp = privacy::CalibrateGaussianNoiseMultiplier(1, 1.0, 1e-5, rdp_only).value();
  EXPECT_GT(one_rdp, one);
  privacy::CalibrationOptions classic = rdp_only;
  classic.conversion.rdp_conversion = privacy::RdpConversion::kClassic;
  for (int classes : {2, 5, 7}) {
    const double separate = privacy::CalibrateGaussianNoiseMultiplier(classes + 1, 1.0, 1e-5).value();
    EXPECT_NEAR(separate / one, std::sqrt(classes + 1.0), 1e-3) << classes;
    const double paper =
        privacy::CalibrateGaussianNoiseMultiplier(classes + 1, 1.0, 1e-5, classic).value();
    const double closed = std::sqrt((classes + 1) / 2.0) /
                          (std::sqrt(std::log(1e5) + 1) - std::sqrt(std::log(1e5)));
    EXPECT_NEAR(paper, closed, 3e-4 * closed) << classes;
  }
  std::printf("s(1 event, exact) = %.5f  s(1 event, RDP improved) = %.5f  s(k=3 exact) = %.5f  "
              "s(k=3 classic) = %.5f\n",
              one, one_rdp, privacy::CalibrateGaussianNoiseMultiplier(3, 1.0, 1e-5).value(),
              privacy::CalibrateGaussianNoiseMultiplier(3, 1.0, 1e-5, classic).value());
}

}  // namespace
}  // namespace dpcurator::embed
