// Parallel composition over a public partition (issue 27 item 1;
// docs/privacy.md 3.7): the partitioned event's curve against hand values
// of Gaussian parts (RDP alpha / (2 s^2), Mironov 2017, Prop. 7), its
// relations, its validation, its ledger text, and the accountant's epsilon.

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/privacy/accounting.h"
#include "core/privacy/conversion.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"
#include "gtest/gtest.h"

namespace dpcurator::privacy {
namespace {

using NR = NeighbouringRelation;

PrivacyEvent G(double s) { return PrivacyEvent::Gaussian(s).value(); }
PrivacyEvent DG(double s) { return PrivacyEvent::DiscreteGaussian(s).value(); }

std::vector<PrivacyEvent> GaussianEvents(std::vector<double> noise_multipliers) {
  std::vector<PrivacyEvent> out;
  for (double s : noise_multipliers) out.push_back(G(s));
  return out;
}

// Expects curve(alpha) == factor * alpha at every default order.
void ExpectLinear(const PrivacyEvent& event, double factor) {
  const RdpCurve curve = RdpCurve::FromEvent(event).value();
  for (size_t i = 0; i < curve.orders().size(); ++i) {
    const double alpha = curve.orders()[i];
    EXPECT_NEAR(curve.values()[i], factor * alpha, 1e-12 * alpha) << "alpha " << alpha;
  }
}

TEST(PartitionedEventTest, AddRemoveIsTheWorstSinglePart) {
  // Parts s = 1, 2, 4: alpha/2, alpha/8, alpha/32; one row is in one part.
  ExpectLinear(PrivacyEvent::PartitionedAddRemove(GaussianEvents({2, 1, 4})).value(), 0.5);
  // K identical parts cost exactly one part.
  ExpectLinear(PrivacyEvent::PartitionedAddRemove(GaussianEvents(std::vector<double>(10, 3.0))).value(),
               1.0 / 18.0);
}

TEST(PartitionedEventTest, ReplaceOneIsTheWorstMoveBetweenTwoParts) {
  // add/remove s = 1, 2, 4 and replace-one s = 2 each: a row moving from the
  // s = 1 part to the s = 2 part costs alpha/2 + alpha/8 = 5 alpha/8, more
  // than any part's own replace-one alpha/8.
  ExpectLinear(PrivacyEvent::PartitionedReplaceOne(GaussianEvents({1, 2, 4}), GaussianEvents({2, 2, 2}))
                   .value(),
               5.0 / 8.0);
  // K identical Gaussian(s) parts: 2 alpha / (2 s^2), the Gaussian of s/sqrt 2.
  ExpectLinear(PrivacyEvent::PartitionedReplaceOne(GaussianEvents(std::vector<double>(10, 2.0)),
                                                   GaussianEvents(std::vector<double>(10, 2.0)))
                   .value(),
               0.25);
}

TEST(PartitionedEventTest, ReplaceOneInsideAPartCanDominate) {
  // add/remove s = 4 (alpha/32 each, two of them alpha/16) against a part's
  // replace-one s = 1 (alpha/2).
  ExpectLinear(PrivacyEvent::PartitionedReplaceOne(GaussianEvents({4, 4, 4}), GaussianEvents({4, 1, 4}))
                   .value(),
               0.5);
}

TEST(PartitionedEventTest, OnePartUnderReplaceOneStillCountsRowsLeavingIt) {
  // A row may move between the one opened part and a value with no part:
  // one add/remove neighbour (alpha/2), more than its replace-one alpha/8.
  ExpectLinear(PrivacyEvent::PartitionedReplaceOne(GaussianEvents({1}), GaussianEvents({2})).value(), 0.5);
}

TEST(PartitionedEventTest, SubsampledPartsTakeTheMaxOrderByOrder) {
  // Poisson parts at different rates: the max is taken per order, so the
  // curve equals the larger part's curve wherever it is larger.
  const PrivacyEvent a =
      PrivacyEvent::SelfCompose(PrivacyEvent::PoissonSampledGaussian(0.01, 1.1).value(), 1000)
          .value();
  const PrivacyEvent b =
      PrivacyEvent::SelfCompose(PrivacyEvent::PoissonSampledGaussian(0.02, 2.0).value(), 500)
          .value();
  const RdpCurve ca = RdpCurve::FromEvent(a).value();
  const RdpCurve cb = RdpCurve::FromEvent(b).value();
  const RdpCurve both = RdpCurve::FromEvent(PrivacyEvent::PartitionedAddRemove({a, b, a}).value())
                            .value();
  for (size_t i = 0; i < both.values().size(); ++i) {
    EXPECT_EQ(both.values()[i], std::max(ca.values()[i], cb.values()[i]));
  }
}

TEST(PartitionedEventTest, RelationsAndValidation) {
  const PrivacyEvent ar = PrivacyEvent::PartitionedAddRemove(GaussianEvents({1, 1})).value();
  EXPECT_TRUE(ar.IsValidFor(NR::kAddRemove));
  EXPECT_FALSE(ar.IsValidFor(NR::kReplaceOne));
  const PrivacyEvent ro =
      PrivacyEvent::PartitionedReplaceOne(GaussianEvents({1, 1}), GaussianEvents({1, 1})).value();
  EXPECT_FALSE(ro.IsValidFor(NR::kAddRemove));
  EXPECT_TRUE(ro.IsValidFor(NR::kReplaceOne));

  EXPECT_EQ(PrivacyEvent::PartitionedAddRemove({}).status().message(),
            "A partitioned event must have 1 to 4096 parts, got 0");
  EXPECT_FALSE(
      PrivacyEvent::PartitionedAddRemove(std::vector<PrivacyEvent>(4097, G(1))).ok());
  // A fixed-size without-replacement part is not an add/remove mechanism
  // (its size is not public under a partition).
  const PrivacyEvent wor = PrivacyEvent::SampledWithoutReplacementGaussian(0.1, 1).value();
  const PrivacyEvent poisson = PrivacyEvent::PoissonSampledGaussian(0.1, 1).value();
  EXPECT_EQ(PrivacyEvent::PartitionedAddRemove({G(1), wor}).status().message(),
            "Part 1's add/remove event SampledWithoutReplacementGaussian(q=0.1, s=1) is not "
            "defined under ADD_REMOVE neighbours");
  EXPECT_FALSE(PrivacyEvent::PartitionedReplaceOne({wor}, {G(1)}).ok());
  // Poisson steps have no replace-one curve here.
  EXPECT_FALSE(PrivacyEvent::PartitionedReplaceOne({poisson}, {poisson}).ok());
  EXPECT_FALSE(PrivacyEvent::PartitionedReplaceOne(GaussianEvents({1, 1}), GaussianEvents({1})).ok());
  // A replace-one partition is not an add/remove part of another partition.
  EXPECT_FALSE(PrivacyEvent::PartitionedAddRemove({ro}).ok());
  EXPECT_TRUE(PrivacyEvent::PartitionedAddRemove({ar, G(2)}).ok());
}

TEST(PartitionedEventTest, DescribeNamesRelationAndParts) {
  EXPECT_EQ(Describe(PrivacyEvent::PartitionedAddRemove(GaussianEvents({1, 2})).value()),
            "Partitioned(ADD_REMOVE)[Gaussian(s=1), Gaussian(s=2)]");
  EXPECT_EQ(Describe(PrivacyEvent::PartitionedReplaceOne(GaussianEvents({1}), GaussianEvents({3})).value()),
            "Partitioned(REPLACE_ONE)[Gaussian(s=1) | Gaussian(s=3)]");
}

TEST(PartitionedEventTest, LedgerTextRoundTrips) {
  const PrivacyEvent step = PrivacyEvent::PoissonSampledDiscreteGaussian(0.01, 1.3).value();
  const PrivacyEvent session = PrivacyEvent::SelfCompose(step, 700).value();
  const std::vector<PrivacyEvent> events = {
      PrivacyEvent::PartitionedAddRemove({session, session, session}).value(),
      PrivacyEvent::PartitionedAddRemove({PrivacyEvent::Compose({G(1), DG(2)}).value()}).value(),
      PrivacyEvent::PartitionedReplaceOne(GaussianEvents({1, 2}), {DG(3), DG(0.5)}).value(),
  };
  EXPECT_EQ(EncodeEvent(events[0]),
            "partition(add_remove;repeat(700;discrete_poisson(0.01,1.3));"
            "repeat(700;discrete_poisson(0.01,1.3));repeat(700;discrete_poisson(0.01,1.3)))");
  EXPECT_EQ(EncodeEvent(events[2]),
            "partition(replace_one;gaussian(1);gaussian(2);discrete_gaussian(3);"
            "discrete_gaussian(0.5))");
  for (const PrivacyEvent& event : events) {
    const std::string text = EncodeEvent(event);
    const absl::StatusOr<PrivacyEvent> decoded = DecodeEvent(text);
    ASSERT_TRUE(decoded.ok()) << text << ": " << decoded.status();
    EXPECT_EQ(EncodeEvent(*decoded), text);
    EXPECT_EQ(RdpCurve::FromEvent(*decoded)->values(), RdpCurve::FromEvent(event)->values());
    EXPECT_EQ(decoded->IsValidFor(NR::kAddRemove), event.IsValidFor(NR::kAddRemove));
  }
  for (const char* bad : {"partition()", "partition(add_remove)", "partition(sideways;gaussian(1))",
                          "partition(replace_one;gaussian(1))",
                          "partition(replace_one;gaussian(1);gaussian(1);gaussian(1))"}) {
    EXPECT_EQ(DecodeEvent(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
  // The add/remove parts' relation is checked on decode too.
  EXPECT_FALSE(DecodeEvent("partition(add_remove;wor(0.1,1))").ok());
}

TEST(PartitionedEventTest, AccountantChargesOnePartUnderAddRemove) {
  // Ten per-class sessions cost what one costs (the point of issue 27).
  const PrivacyEvent session = PrivacyEvent::SelfCompose(
      PrivacyEvent::PoissonSampledDiscreteGaussian(0.01, 1.1).value(), 10000).value();
  AccountantState one(NR::kAddRemove);
  ASSERT_TRUE(one.Add(session).ok());
  AccountantState ten(NR::kAddRemove);
  ASSERT_TRUE(
      ten.Add(PrivacyEvent::PartitionedAddRemove(std::vector<PrivacyEvent>(10, session)).value())
          .ok());
  EXPECT_EQ(ten.Rdp(), one.Rdp());
  EXPECT_DOUBLE_EQ(ten.Epsilon(1e-5)->epsilon, one.Epsilon(1e-5)->epsilon);
  // And a refund negates it exactly.
  ASSERT_TRUE(
      ten.Subtract(PrivacyEvent::PartitionedAddRemove(std::vector<PrivacyEvent>(10, session)).value())
          .ok());
  EXPECT_EQ(ten, AccountantState(NR::kAddRemove));
  // Not admitted on a replace-one dataset.
  AccountantState replace(NR::kReplaceOne);
  EXPECT_FALSE(replace.Add(PrivacyEvent::PartitionedAddRemove({session}).value()).ok());
}

TEST(PartitionedEventTest, AccountantChargesTwoPartsUnderReplaceOne) {
  // Identical discrete Gaussian parts of s: the charge is the Gaussian of
  // s / sqrt 2 (two add/remove neighbours), not one part's s.
  const double s = 4.0;
  AccountantState parts(NR::kReplaceOne);
  ASSERT_TRUE(parts
                  .Add(PrivacyEvent::PartitionedReplaceOne(std::vector<PrivacyEvent>(5, DG(s)),
                                                           std::vector<PrivacyEvent>(5, DG(s)))
                           .value())
                  .ok());
  AccountantState two(NR::kReplaceOne);
  ASSERT_TRUE(two.Add(DG(s / std::sqrt(2.0))).ok());
  AccountantState single(NR::kReplaceOne);
  ASSERT_TRUE(single.Add(DG(s)).ok());
  EXPECT_NEAR(parts.Epsilon(1e-5)->epsilon, two.Epsilon(1e-5)->epsilon, 1e-9);
  EXPECT_GT(parts.Epsilon(1e-5)->epsilon, 1.3 * single.Epsilon(1e-5)->epsilon);
}

// Under ADD_REMOVE, K copies of one bare grid Gaussian lose exactly what one
// does (docs/privacy.md 3.7, "One part's profile"), so the ledger judges
// them by the discrete Gaussian's profile like the bare release, not by the
// RDP conversion. Parts of different multipliers, and replace-one
// partitions, keep the RDP conversion.
PrivacyEvent GridEvent(double s) { return PrivacyEvent::GridGaussian(s).value(); }

TEST(PartitionedEventTest, IdenticalGridPartsUnderAddRemoveGetOnePartsProfile) {
  const double s = 3.7443;  // (1, 1e-5) for one grid release (sec. 4.6)
  const PrivacyEvent one = GridEvent(s);
  const PrivacyEvent ten =
      PrivacyEvent::PartitionedAddRemove(std::vector<PrivacyEvent>(10, GridEvent(s))).value();
  ASSERT_EQ(SingleGridGaussianInverseVariance(ten), SingleGridGaussianInverseVariance(one));
  const EpsilonReport bare = ComputeEpsilonReport(one, 1e-5).value();
  const EpsilonReport parts = ComputeEpsilonReport(ten, 1e-5).value();
  EXPECT_EQ(parts.epsilon, bare.epsilon);
  // The profile is what lowers it: the RDP conversion alone is about 8%
  // higher at this s.
  EXPECT_LT(parts.epsilon, 0.95 * parts.epsilon_rdp);
  // Through the ledger's accountant: one charge, the bare release's epsilon,
  // and a refund restores the empty state (its grid count included).
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(ten).ok());
  EXPECT_EQ(state.Epsilon(1e-5)->epsilon, bare.epsilon);
  ASSERT_TRUE(state.Subtract(ten).ok());
  EXPECT_EQ(state, AccountantState(NR::kAddRemove));
}

TEST(PartitionedEventTest, OtherPartitionsKeepTheRdpConversion) {
  const double s = 3.7443;
  // Different multipliers: no single part stands for all.
  const PrivacyEvent mixed =
      PrivacyEvent::PartitionedAddRemove({GridEvent(s), GridEvent(2 * s)}).value();
  EXPECT_FALSE(SingleGridGaussianInverseVariance(mixed).has_value());
  EXPECT_EQ(ComputeEpsilonReport(mixed, 1e-5)->epsilon,
            ComputeEpsilonReport(mixed, 1e-5)->epsilon_rdp);
  // A part that is not a bare grid Gaussian.
  EXPECT_FALSE(SingleGridGaussianInverseVariance(
                   PrivacyEvent::PartitionedAddRemove({GridEvent(s), DG(s)}).value())
                   .has_value());
  // Replace-one: a moved row touches two parts.
  const PrivacyEvent replace = PrivacyEvent::PartitionedReplaceOne(
                                   std::vector<PrivacyEvent>(3, GridEvent(s)),
                                   std::vector<PrivacyEvent>(3, GridEvent(s)))
                                   .value();
  EXPECT_FALSE(SingleGridGaussianInverseVariance(replace).has_value());
  // Two partitions composed: the profile covers one release only.
  AccountantState twice(NR::kAddRemove);
  const PrivacyEvent ten =
      PrivacyEvent::PartitionedAddRemove(std::vector<PrivacyEvent>(10, GridEvent(s))).value();
  ASSERT_TRUE(twice.Add(ten).ok());
  ASSERT_TRUE(twice.Add(ten).ok());
  EXPECT_EQ(twice.Epsilon(1e-5)->epsilon, twice.Epsilon(1e-5)->epsilon_rdp);
}

}  // namespace
}  // namespace dpcurator::privacy
