#include "core/privacy/accounting.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/privacy/test_util.h"

namespace dpcurator::privacy {
namespace {

using testing::PoissonSteps;
using testing::RelNear;
using testing::WorSteps;
using NR = NeighbouringRelation;

TEST(AccountantStateTest, EmptyStateSpendsNothing) {
  const AccountantState state(NR::kAddRemove);
  const EpsilonReport r = state.Epsilon(1e-5).value();
  EXPECT_EQ(r.epsilon, 0.0);
  EXPECT_EQ(state.event_count(), 0);
  EXPECT_TRUE(state.all_plain_gaussian());
}

TEST(AccountantStateTest, MatchesDirectComputation) {
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(PoissonSteps(0.01, 1.1, 10000)).ok());
  const EpsilonReport r = state.Epsilon(1e-5).value();
  // Fixed point rounds each value up by < 2^-64 and the read-out by one ulp.
  EXPECT_TRUE(RelNear(r.epsilon, 5.63201, 1e-6));
  EXPECT_NEAR(r.epsilon, 5.6320106701, 1e-9);
  EXPECT_GE(r.epsilon, ComputeEpsilonReport(PoissonSteps(0.01, 1.1, 10000), 1e-5)
                           .value()
                           .epsilon);
  EXPECT_FALSE(state.all_plain_gaussian());
}

TEST(AccountantStateTest, IncrementalEqualsComposed) {
  // 10000 separate Adds and one SelfComposed event give the same guarantee.
  AccountantState one_by_one(NR::kAddRemove);
  const EventCharge step =
      EventCharge::Of(PrivacyEvent::PoissonSampledGaussian(0.01, 1.1).value()).value();
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(one_by_one.Add(step).ok());
  EXPECT_EQ(one_by_one.event_count(), 10000);
  EXPECT_TRUE(RelNear(one_by_one.Epsilon(1e-5).value().epsilon, 5.63201, 1e-6));
}

TEST(AccountantStateTest, PlainGaussiansUseTheExactConversion) {
  AccountantState state(NR::kReplaceOne);
  ASSERT_TRUE(state.Add(PrivacyEvent::Gaussian(1.0).value()).ok());
  EpsilonReport r = state.Epsilon(1e-5).value();
  ASSERT_TRUE(r.epsilon_exact.has_value());
  EXPECT_TRUE(RelNear(*r.epsilon_exact, 4.37718, 1e-6));
  EXPECT_TRUE(RelNear(r.epsilon_rdp, 4.72851, 1e-6));
  EXPECT_EQ(r.epsilon, *r.epsilon_exact);
  // A Laplace release ends exactness; refunding it restores it.
  const PrivacyEvent laplace = PrivacyEvent::Laplace(10.0).value();
  ASSERT_TRUE(state.Add(laplace).ok());
  EXPECT_FALSE(state.Epsilon(1e-5).value().epsilon_exact.has_value());
  ASSERT_TRUE(state.Subtract(laplace).ok());
  r = state.Epsilon(1e-5).value();
  EXPECT_TRUE(r.epsilon_exact.has_value());
}

TEST(AccountantStateTest, RelationMismatchIsAnError) {
  AccountantState add_remove(NR::kAddRemove);
  AccountantState replace_one(NR::kReplaceOne);
  const PrivacyEvent poisson = PoissonSteps(0.01, 1.0, 10);
  const PrivacyEvent wor = WorSteps(0.01, 1.0, 10);
  const PrivacyEvent rr = PrivacyEvent::RandomizedResponse(3, 1.0).value();
  EXPECT_EQ(replace_one.Add(poisson).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(add_remove.Add(wor).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(add_remove.Add(rr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(add_remove.Add(wor).message(),
            "Event SampledWithoutReplacementGaussian(q=0.01, s=1) x 10 is not "
            "defined under ADD_REMOVE neighbours");
  const EventCharge charge = EventCharge::Of(poisson).value();
  EXPECT_EQ(replace_one.Add(charge).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(replace_one.EpsilonIfAdded(charge, 1e-5).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(replace_one.event_count(), 0);
  EXPECT_TRUE(add_remove.Add(poisson).ok());
  EXPECT_TRUE(replace_one.Add(wor).ok());
  EXPECT_TRUE(replace_one.Add(rr).ok());
}

TEST(AccountantStateTest, RefundRestoresTheStateExactly) {
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(PoissonSteps(0.013, 0.97, 1234)).ok());
  ASSERT_TRUE(state.Add(PrivacyEvent::Gaussian(3.3).value()).ok());
  ASSERT_TRUE(state.Add(PrivacyEvent::Laplace(7.1).value()).ok());
  const std::string before_bytes = state.Serialize();
  const EpsilonReport before = state.Epsilon(1e-6).value();
  const PrivacyEvent failed = PrivacyEvent::Compose(
      {PoissonSteps(0.37, 1.7, 33), PrivacyEvent::Gaussian(0.9).value()}).value();
  ASSERT_TRUE(state.Add(failed).ok());
  EXPECT_GT(state.Epsilon(1e-6).value().epsilon, before.epsilon);
  ASSERT_TRUE(state.Subtract(failed).ok());
  EXPECT_EQ(state.Serialize(), before_bytes);
  const EpsilonReport after = state.Epsilon(1e-6).value();
  EXPECT_EQ(after.epsilon, before.epsilon);
  EXPECT_EQ(after.epsilon_rdp, before.epsilon_rdp);
  EXPECT_EQ(after.optimal_order, before.optimal_order);
}

TEST(AccountantStateTest, OrderOfEventsDoesNotMatter) {
  const std::vector<PrivacyEvent> events = {
      PoissonSteps(0.01, 1.1, 100), PrivacyEvent::Gaussian(2.0).value(),
      PrivacyEvent::Laplace(0.3).value(), PoissonSteps(0.2, 5.0, 3)};
  AccountantState forward(NR::kAddRemove);
  AccountantState backward(NR::kAddRemove);
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_TRUE(forward.Add(events[i]).ok());
    ASSERT_TRUE(backward.Add(events[events.size() - 1 - i]).ok());
  }
  EXPECT_EQ(forward, backward);
  EXPECT_EQ(forward.Serialize(), backward.Serialize());
}

TEST(AccountantStateTest, RefundOfSomethingNotChargedIsRefused) {
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(PrivacyEvent::Gaussian(2.0).value()).ok());
  const std::string bytes = state.Serialize();
  EXPECT_EQ(state.Subtract(PrivacyEvent::Gaussian(1.0).value()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state.Subtract(PrivacyEvent::Laplace(100.0).value()).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state.Serialize(), bytes);
}

TEST(AccountantStateTest, SerialisationRoundTrip) {
  AccountantState state(NR::kReplaceOne);
  ASSERT_TRUE(state.Add(WorSteps(0.02, 1.3, 500)).ok());
  ASSERT_TRUE(state.Add(PrivacyEvent::RandomizedResponse(5, 0.5).value()).ok());
  const std::string bytes = state.Serialize();
  EXPECT_EQ(bytes.size(), 2532u);
  const AccountantState back = AccountantState::Deserialize(bytes).value();
  EXPECT_EQ(back, state);
  EXPECT_EQ(back.relation(), NR::kReplaceOne);
  EXPECT_EQ(back.Epsilon(1e-5).value().epsilon, state.Epsilon(1e-5).value().epsilon);
  // Corruption is detected.
  EXPECT_FALSE(AccountantState::Deserialize(bytes.substr(1)).ok());
  std::string bad = bytes;
  bad[0] = 9;
  EXPECT_FALSE(AccountantState::Deserialize(bad).ok());
  bad = bytes;
  bad[1] = 7;
  EXPECT_FALSE(AccountantState::Deserialize(bad).ok());
  bad = bytes;
  bad[bad.size() - 1] = static_cast<char>(0xff);  // hi word of the last order
  EXPECT_FALSE(AccountantState::Deserialize(bad).ok());
}

TEST(AccountantStateTest, AdmissionDoesNotChangeTheState) {
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(PoissonSteps(0.01, 1.1, 5000)).ok());
  const std::string bytes = state.Serialize();
  const EventCharge next = EventCharge::Of(PoissonSteps(0.01, 1.1, 5000)).value();
  const EpsilonReport if_added = state.EpsilonIfAdded(next, 1e-5).value();
  EXPECT_EQ(state.Serialize(), bytes);
  ASSERT_TRUE(state.Add(next).ok());
  EXPECT_EQ(state.Epsilon(1e-5).value().epsilon, if_added.epsilon);
  EXPECT_TRUE(RelNear(if_added.epsilon, 5.63201, 1e-6));
}

TEST(AccountantStateTest, InfiniteOrdersSaturateAndRefundCleanly) {
  // A tiny noise multiplier makes the top orders astronomically large: they
  // saturate (treated as +inf) without breaking the others or refunds.
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(PrivacyEvent::Gaussian(1.0).value()).ok());
  const std::string bytes = state.Serialize();
  const PrivacyEvent harsh =
      PrivacyEvent::SelfCompose(PrivacyEvent::Gaussian(1e-4).value(), 100).value();
  ASSERT_TRUE(state.Add(harsh).ok());
  EXPECT_EQ(state.Rdp().back(), INFINITY);
  const EpsilonReport r = state.Epsilon(1e-5).value();
  EXPECT_TRUE(std::isfinite(r.epsilon));
  ASSERT_TRUE(state.Subtract(harsh).ok());
  EXPECT_EQ(state.Serialize(), bytes);
}

}  // namespace
}  // namespace dpcurator::privacy
