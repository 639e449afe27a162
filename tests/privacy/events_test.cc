#include "core/privacy/events.h"

#include <cmath>

#include "gtest/gtest.h"

namespace dpcurator::privacy {
namespace {

using NR = NeighbouringRelation;

TEST(PrivacyEventTest, FactoriesValidateWithUniformMessages) {
  EXPECT_EQ(PrivacyEvent::Gaussian(0.0).status().message(),
            "Noise multiplier must be finite and positive, got 0");
  EXPECT_FALSE(PrivacyEvent::Gaussian(NAN).ok());
  EXPECT_FALSE(PrivacyEvent::Gaussian(INFINITY).ok());
  EXPECT_EQ(PrivacyEvent::PoissonSampledGaussian(1.5, 1.0).status().message(),
            "Sampling rate must be in [0, 1], got 1.5");
  EXPECT_FALSE(PrivacyEvent::SampledWithoutReplacementGaussian(-0.1, 1.0).ok());
  EXPECT_FALSE(PrivacyEvent::Laplace(-1.0).ok());
  EXPECT_FALSE(PrivacyEvent::RandomizedResponse(1, 1.0).ok());
  EXPECT_FALSE(PrivacyEvent::RandomizedResponse(3, 0.0).ok());
  EXPECT_EQ(PrivacyEvent::SelfCompose(PrivacyEvent::Gaussian(1).value(), 0)
                .status()
                .message(),
            "Count must be a positive integer, got 0");
}

TEST(PrivacyEventTest, RelationsOfEachMechanism) {
  const PrivacyEvent g = PrivacyEvent::Gaussian(1).value();
  const PrivacyEvent p = PrivacyEvent::PoissonSampledGaussian(0.1, 1).value();
  const PrivacyEvent w = PrivacyEvent::SampledWithoutReplacementGaussian(0.1, 1).value();
  const PrivacyEvent l = PrivacyEvent::Laplace(1).value();
  const PrivacyEvent rr = PrivacyEvent::RandomizedResponse(4, 1).value();
  EXPECT_TRUE(g.IsValidFor(NR::kAddRemove) && g.IsValidFor(NR::kReplaceOne));
  EXPECT_TRUE(l.IsValidFor(NR::kAddRemove) && l.IsValidFor(NR::kReplaceOne));
  EXPECT_TRUE(p.IsValidFor(NR::kAddRemove) && !p.IsValidFor(NR::kReplaceOne));
  EXPECT_TRUE(!w.IsValidFor(NR::kAddRemove) && w.IsValidFor(NR::kReplaceOne));
  EXPECT_TRUE(!rr.IsValidFor(NR::kAddRemove) && rr.IsValidFor(NR::kReplaceOne));
  EXPECT_TRUE(CheckRelation(p, NR::kAddRemove).ok());
  EXPECT_EQ(CheckRelation(p, NR::kReplaceOne).code(),
            absl::StatusCode::kInvalidArgument);
  // Compositions keep the intersection; an empty intersection is refused.
  const PrivacyEvent gp = PrivacyEvent::Compose({g, p}).value();
  EXPECT_TRUE(gp.IsValidFor(NR::kAddRemove));
  EXPECT_FALSE(gp.IsValidFor(NR::kReplaceOne));
  EXPECT_EQ(PrivacyEvent::Compose({p, w}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PrivacyEvent::Compose({gp, rr}).ok());
  EXPECT_FALSE(PrivacyEvent::SelfCompose(w, 3).value().IsValidFor(NR::kAddRemove));
}

TEST(PrivacyEventTest, PlainGaussianDetection) {
  const PrivacyEvent g2 = PrivacyEvent::Gaussian(2).value();
  const PrivacyEvent g4 = PrivacyEvent::Gaussian(4).value();
  const PrivacyEvent nested =
      PrivacyEvent::Compose({g2, PrivacyEvent::SelfCompose(g4, 8).value()}).value();
  EXPECT_TRUE(IsPlainGaussian(nested));
  EXPECT_DOUBLE_EQ(PlainGaussianInverseVarianceSum(nested).value(),
                   0.25 + 8.0 / 16.0);
  EXPECT_TRUE(IsPlainGaussian(PrivacyEvent::Compose({}).value()));
  EXPECT_EQ(PlainGaussianInverseVarianceSum(PrivacyEvent::Compose({}).value()), 0.0);
  // A subsampled Gaussian is not plain, even at q = 1.
  const PrivacyEvent p1 = PrivacyEvent::PoissonSampledGaussian(1.0, 1.0).value();
  EXPECT_FALSE(IsPlainGaussian(p1));
  EXPECT_FALSE(IsPlainGaussian(PrivacyEvent::Compose({g2, p1}).value()));
  EXPECT_FALSE(IsPlainGaussian(PrivacyEvent::Laplace(1).value()));
}

TEST(PrivacyEventTest, DescribeIsReadable) {
  const PrivacyEvent e =
      PrivacyEvent::SelfCompose(PrivacyEvent::PoissonSampledGaussian(0.01, 1.1).value(),
                                10000)
          .value();
  EXPECT_EQ(Describe(e), "PoissonSampledGaussian(q=0.01, s=1.1) x 10000");
  EXPECT_EQ(Describe(PrivacyEvent::Compose({PrivacyEvent::Gaussian(2).value(),
                                            PrivacyEvent::Laplace(0.5).value()})
                         .value()),
            "Composed[Gaussian(s=2), Laplace(b=0.5)]");
  EXPECT_EQ(RelationName(NR::kReplaceOne), "REPLACE_ONE");
}

}  // namespace
}  // namespace dpcurator::privacy
