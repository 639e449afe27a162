// Accounting for discrete (grid) Gaussian noise (docs/privacy.md 3.2, 4.2):
// its RDP curve is the continuous one, but it never gets the exact analytic
// path, alone or mixed with continuous Gaussians; calibration for it is the
// RDP route, conservative and tight; old continuous events keep theirs.

#include <cmath>
#include <vector>

#include "core/privacy/accounting.h"
#include "core/privacy/calibration.h"
#include "core/privacy/conversion.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"
#include "gtest/gtest.h"
#include "tests/privacy/test_util.h"

namespace dpcurator::privacy {
namespace {

using testing::RelNear;
using NR = NeighbouringRelation;

PrivacyEvent Discrete(double s) { return PrivacyEvent::DiscreteGaussian(s).value(); }
PrivacyEvent Continuous(double s) { return PrivacyEvent::Gaussian(s).value(); }
PrivacyEvent Times(const PrivacyEvent& e, int64_t k) {
  return PrivacyEvent::SelfCompose(e, k).value();
}

// The improved conversion of sum_i alpha / (2 s_i^2) on the ledger's grid,
// computed here from the closed form, not from any event.
double RdpEpsilonOfGaussians(double inverse_variance_sum, double delta) {
  std::vector<double> rdp;
  for (double a : DefaultRdpOrders()) rdp.push_back(a * inverse_variance_sum / 2.0);
  return RdpToEpsilon(DefaultRdpOrders(), rdp, delta).value().epsilon;
}

double LedgerEpsilon(const PrivacyEvent& event, double delta) {
  AccountantState state(NR::kAddRemove);
  EXPECT_TRUE(state.Add(event).ok());
  return state.Epsilon(delta).value().epsilon;
}

TEST(DiscreteGaussianEventTest, ValidatedBothRelationsSameCurveNeverPlain) {
  EXPECT_EQ(PrivacyEvent::DiscreteGaussian(0.0).status().message(),
            "Noise multiplier must be finite and positive, got 0");
  EXPECT_FALSE(PrivacyEvent::DiscreteGaussian(NAN).ok());
  EXPECT_FALSE(PrivacyEvent::DiscreteGaussian(-2.0).ok());
  const PrivacyEvent d = Discrete(2.5);
  EXPECT_TRUE(d.IsValidFor(NR::kAddRemove) && d.IsValidFor(NR::kReplaceOne));
  EXPECT_EQ(Describe(d), "DiscreteGaussian(s=2.5)");
  // CKS20: the same RDP curve as the continuous Gaussian, order by order.
  EXPECT_EQ(ComputeRdp(d, DefaultRdpOrders()).value(),
            ComputeRdp(Continuous(2.5), DefaultRdpOrders()).value());
  for (double a : {1.5, 2.0, 32.0, 1024.0}) {
    EXPECT_TRUE(RelNear(ComputeRdp(d, {a}).value()[0], a / (2 * 2.5 * 2.5), 1e-15)) << a;
  }
  // Never a plain Gaussian: alone, repeated, nested, or beside continuous ones.
  EXPECT_FALSE(IsPlainGaussian(d));
  EXPECT_FALSE(PlainGaussianInverseVarianceSum(d).has_value());
  EXPECT_FALSE(IsPlainGaussian(Times(d, 3)));
  EXPECT_FALSE(IsPlainGaussian(PrivacyEvent::Compose({Continuous(2), d}).value()));
  EXPECT_FALSE(IsPlainGaussian(
      PrivacyEvent::Compose({Continuous(2), PrivacyEvent::Compose({d}).value()}).value()));
  EXPECT_TRUE(IsPlainGaussian(Times(Continuous(2.5), 3)));
}

// PRIVACY.md's one-Gaussian vector: s = 1 converts to 4.72851 by RDP and
// 4.37718 exactly. Discrete noise gets the first only.
TEST(DiscreteGaussianConversionTest, OneDiscreteGaussianGetsTheRdpConversionOnly) {
  const EpsilonReport d = ComputeEpsilonReport(Discrete(1.0), 1e-5).value();
  EXPECT_FALSE(d.epsilon_exact.has_value());
  EXPECT_TRUE(RelNear(d.epsilon_rdp, 4.72851, 1e-6));
  EXPECT_EQ(d.epsilon, d.epsilon_rdp);
  EXPECT_EQ(d.epsilon, RdpEpsilonOfGaussians(1.0, 1e-5));
  // The continuous event keeps its exact path (the smaller bound).
  const EpsilonReport c = ComputeEpsilonReport(Continuous(1.0), 1e-5).value();
  ASSERT_TRUE(c.epsilon_exact.has_value());
  EXPECT_TRUE(RelNear(*c.epsilon_exact, 4.37718, 1e-6));
  EXPECT_EQ(c.epsilon, *c.epsilon_exact);
  EXPECT_EQ(c.epsilon_rdp, d.epsilon_rdp);
}

TEST(DiscreteGaussianAccountingTest, LedgerWithADiscreteEventReportsExactlyTheRdpConversion) {
  for (double delta : {1e-5, 1e-8}) {
    SCOPED_TRACE(delta);
    // Discrete only.
    AccountantState discrete(NR::kReplaceOne);
    ASSERT_TRUE(discrete.Add(Discrete(3.0)).ok());
    ASSERT_TRUE(discrete.Add(Times(Discrete(5.0), 4)).ok());
    EXPECT_FALSE(discrete.all_plain_gaussian());
    const EpsilonReport r = discrete.Epsilon(delta).value();
    EXPECT_FALSE(r.epsilon_exact.has_value());
    EXPECT_EQ(r.epsilon, r.epsilon_rdp);
    EXPECT_TRUE(RelNear(r.epsilon, RdpEpsilonOfGaussians(1 / 9.0 + 4 / 25.0, delta), 1e-12));

    // Old continuous events first: exact path, strictly below RDP.
    AccountantState mixed(NR::kAddRemove);
    ASSERT_TRUE(mixed.Add(Continuous(3.0)).ok());
    const EpsilonReport before = mixed.Epsilon(delta).value();
    ASSERT_TRUE(before.epsilon_exact.has_value());
    EXPECT_LT(before.epsilon, before.epsilon_rdp);
    // Then a discrete one: RDP of the sum of the curves, nothing else.
    ASSERT_TRUE(mixed.Add(Discrete(3.0)).ok());
    const EpsilonReport after = mixed.Epsilon(delta).value();
    EXPECT_FALSE(after.epsilon_exact.has_value());
    EXPECT_EQ(after.epsilon, after.epsilon_rdp);
    EXPECT_TRUE(RelNear(after.epsilon, RdpEpsilonOfGaussians(2 / 9.0, delta), 1e-12));
    // Two continuous ones would have been charged less (exact composition).
    EXPECT_LT(LedgerEpsilon(Times(Continuous(3.0), 2), delta), after.epsilon);
    // The admission check sees the same.
    AccountantState fresh(NR::kAddRemove);
    ASSERT_TRUE(fresh.Add(Continuous(3.0)).ok());
    const EventCharge charge = EventCharge::Of(Discrete(3.0)).value();
    const EpsilonReport admitted = fresh.EpsilonIfAdded(charge, delta).value();
    EXPECT_FALSE(admitted.epsilon_exact.has_value());
    EXPECT_EQ(admitted.epsilon, after.epsilon);
    // A refund of the discrete event restores the continuous-only state,
    // exact path included, bit for bit.
    ASSERT_TRUE(mixed.Subtract(Discrete(3.0)).ok());
    EXPECT_TRUE(mixed == fresh);
    EXPECT_TRUE(mixed.Epsilon(delta).value().epsilon_exact.has_value());
  }
}

TEST(DiscreteGaussianAccountingTest, SerialisedStateKeepsTheKindApart) {
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(Continuous(2.0)).ok());
  ASSERT_TRUE(state.Add(Discrete(2.0)).ok());
  const AccountantState back = AccountantState::Deserialize(state.Serialize()).value();
  EXPECT_TRUE(back == state);
  EXPECT_FALSE(back.all_plain_gaussian());
  EXPECT_FALSE(back.Epsilon(1e-5).value().epsilon_exact.has_value());
}

// Round trip: eps(calibrated s) <= target, and 1e-6 less noise misses it.
TEST(DiscreteGaussianCalibrationTest, ConservativeAndMinimal) {
  for (double target : {0.1, 0.5, 1.0, 3.0, 8.0}) {
    for (double delta : {1e-5, 1e-8}) {
      for (int64_t k : {1, 2, 7}) {
        SCOPED_TRACE(::testing::Message() << "eps=" << target << " delta=" << delta
                                          << " k=" << k);
        const double s = CalibrateDiscreteGaussianNoiseMultiplier(k, target, delta).value();
        EXPECT_LE(LedgerEpsilon(Times(Discrete(s), k), delta), target);
        EXPECT_GT(LedgerEpsilon(Times(Discrete(s * (1 - 1e-6)), k), delta), target);
        // Independent of the event machinery: the closed-form curve.
        EXPECT_LE(RdpEpsilonOfGaussians(k / (s * s), delta), target);
        // Never less noise than the continuous Gaussian's exact calibration.
        EXPECT_GE(s, CalibrateGaussianNoiseMultiplier(k, target, delta).value());
      }
    }
  }
}

// docs/privacy.md 2.3 and 3.2: the server's multiplier at eps = 1,
// delta = 1e-5 is 4.0454 (RDP), against the continuous analytic 3.7306.
TEST(DiscreteGaussianCalibrationTest, TheServerMultiplierAtEpsilonOne) {
  const double s = CalibrateDiscreteGaussianNoiseMultiplier(1, 1.0, 1e-5).value();
  EXPECT_NEAR(s, 4.0454, 1e-4);
  const double continuous = CalibrateGaussianNoiseMultiplier(1, 1.0, 1e-5).value();
  EXPECT_NEAR(continuous, 3.73063, 1e-4);
  // PEARL's private length-scale: two discrete events, mu^2 = 2/s^2, so
  // exactly sqrt(2) times the one-event multiplier up to the tolerance.
  const double two = CalibrateDiscreteGaussianNoiseMultiplier(2, 1.0, 1e-5).value();
  EXPECT_TRUE(RelNear(two, std::sqrt(2.0) * s, 1e-8));
}

TEST(DiscreteGaussianCalibrationTest, PriorWithContinuousEventsIsJudgedByRdp) {
  AccountantState prior(NR::kAddRemove);
  ASSERT_TRUE(prior.Add(Continuous(6.0)).ok());
  CalibrationOptions options;
  options.prior = &prior;
  const double s = CalibrateDiscreteGaussianNoiseMultiplier(1, 2.0, 1e-5, options).value();
  AccountantState after = prior;
  ASSERT_TRUE(after.Add(Discrete(s)).ok());
  const EpsilonReport r = after.Epsilon(1e-5).value();
  EXPECT_FALSE(r.epsilon_exact.has_value());
  EXPECT_LE(r.epsilon, 2.0);
  EXPECT_TRUE(RelNear(r.epsilon, 2.0, 1e-6));
  EXPECT_TRUE(RelNear(r.epsilon, RdpEpsilonOfGaussians(1 / 36.0 + 1 / (s * s), 1e-5), 1e-12));
}

TEST(RdpGaussianSigmaTest, ScalesWithSensitivityAndNeverUndershoots) {
  const double s = CalibrateDiscreteGaussianNoiseMultiplier(1, 1.0, 1e-5).value();
  for (double sensitivity : {1e-3, 0.7, 1.0, 2.0, 3.0, 1234.5}) {
    SCOPED_TRACE(sensitivity);
    const double sigma = RdpGaussianSigma(1.0, 1e-5, sensitivity).value();
    EXPECT_GE(sigma / sensitivity, s);
    EXPECT_TRUE(RelNear(sigma, s * sensitivity, 1e-15));
    EXPECT_LE(LedgerEpsilon(Discrete(sigma / sensitivity), 1e-5), 1.0);
  }
  // The LDP setting of tests/ldp: eps = 5, delta = 1e-4, sensitivity 2R = 2.
  const double ldp = RdpGaussianSigma(5.0, 1e-4, 2.0).value();
  EXPECT_LE(RdpEpsilonOfGaussians(4.0 / (ldp * ldp), 1e-4), 5.0);
  EXPECT_GT(RdpEpsilonOfGaussians(4.0 / (ldp * ldp * (1 - 1e-6) * (1 - 1e-6)), 1e-4), 5.0);
  EXPECT_FALSE(RdpGaussianSigma(1.0, 1e-5, 0.0).ok());
  EXPECT_FALSE(RdpGaussianSigma(1.0, 1e-5, INFINITY).ok());
  EXPECT_FALSE(RdpGaussianSigma(0.0, 1e-5, 1.0).ok());
  EXPECT_FALSE(RdpGaussianSigma(1.0, 1.0, 1.0).ok());
}


// --- Approximate events: an additive delta (docs/privacy.md 2.11.2) -------

PrivacyEvent Approx(const PrivacyEvent& e, double delta) {
  return PrivacyEvent::Approximate(e, delta).value();
}

TEST(ApproximateEventTest, ValidatedInnerCurveAndDeltaAddsUp) {
  EXPECT_FALSE(PrivacyEvent::Approximate(Discrete(3.0), 0.0).ok());
  EXPECT_FALSE(PrivacyEvent::Approximate(Discrete(3.0), 1.0).ok());
  EXPECT_FALSE(PrivacyEvent::Approximate(Discrete(3.0), NAN).ok());
  const PrivacyEvent a = Approx(Discrete(3.0), 0x1p-30);
  EXPECT_TRUE(a.IsValidFor(NR::kAddRemove) && a.IsValidFor(NR::kReplaceOne));
  EXPECT_EQ(ComputeRdp(a, DefaultRdpOrders()).value(),
            ComputeRdp(Discrete(3.0), DefaultRdpOrders()).value());
  EXPECT_FALSE(IsPlainGaussian(Approx(Continuous(3.0), 0x1p-30)));
  EXPECT_EQ(ApproximateDelta(Discrete(3.0)), 0.0);
  EXPECT_EQ(ApproximateDelta(a), 0x1p-30);
  // Composition and repetition add deltas up, never less than the sum.
  EXPECT_GE(ApproximateDelta(Times(a, 3)), 3 * 0x1p-30);
  EXPECT_LE(ApproximateDelta(Times(a, 3)), 3.000001 * 0x1p-30);
  const PrivacyEvent both =
      PrivacyEvent::Compose({a, Approx(Discrete(4.0), 0x1p-31), Discrete(5.0)}).value();
  EXPECT_GE(ApproximateDelta(both), 1.5 * 0x1p-30);
  EXPECT_LE(ApproximateDelta(both), 1.500001 * 0x1p-30);
  // The ledger's text keeps the delta exactly.
  EXPECT_EQ(EncodeEvent(a), "approx(9.3132257461547852e-10;discrete_gaussian(3))");
  const PrivacyEvent back = DecodeEvent(EncodeEvent(both)).value();
  EXPECT_EQ(EncodeEvent(back), EncodeEvent(both));
  EXPECT_EQ(ApproximateDelta(back), ApproximateDelta(both));
  EXPECT_FALSE(DecodeEvent("approx(1e-9)").ok());
  EXPECT_FALSE(DecodeEvent("approx(0;discrete_gaussian(3))").ok());
}

// The conversion with approximate events in the history is the plain
// conversion of the same curves at delta - sum delta_i, bit for bit.
TEST(ApproximateAccountingTest, ConversionAtDeltaMinusTheSumIsThePlainOneThere) {
  const double delta = 0x1p-16;  // 1.5e-5; every difference below is exact
  const double d0 = 0x1p-22;     // 2.4e-7
  for (NR relation : {NR::kAddRemove, NR::kReplaceOne}) {
    AccountantState approx(relation);
    AccountantState plain(relation);
    ASSERT_TRUE(approx.Add(Approx(Discrete(3.0), d0)).ok());
    ASSERT_TRUE(approx.Add(Approx(Discrete(4.0), d0)).ok());
    ASSERT_TRUE(approx.Add(PrivacyEvent::GridGaussian(2.0).value()).ok());
    ASSERT_TRUE(plain.Add(Discrete(3.0)).ok());
    ASSERT_TRUE(plain.Add(Discrete(4.0)).ok());
    ASSERT_TRUE(plain.Add(PrivacyEvent::GridGaussian(2.0).value()).ok());
    // The fixed-point sum reads back rounded up by at most an ulp.
    const double sum = approx.approximate_delta();
    EXPECT_GE(sum, 2 * d0);
    EXPECT_LE(sum, std::nextafter(2 * d0, 1.0));
    const EpsilonReport got = approx.Epsilon(delta).value();
    const EpsilonReport want = plain.Epsilon(delta - sum).value();
    EXPECT_EQ(got.epsilon, want.epsilon);
    EXPECT_EQ(got.epsilon_rdp, want.epsilon_rdp);
    EXPECT_EQ(got.approximate_delta, sum);
    // ... and strictly above the plain conversion at delta itself.
    EXPECT_GT(got.epsilon, plain.Epsilon(delta).value().epsilon);
    // One event alone, as the ledger reports "this release alone".
    EXPECT_EQ(ComputeEpsilonReport(Approx(Discrete(3.0), d0), delta).value().epsilon,
              ComputeEpsilonReport(Discrete(3.0), delta - d0).value().epsilon);
  }
}

// A history whose deltas reach the dataset's delta has no finite epsilon
// there: the admission check (EpsilonIfAdded) sees +inf and refuses.
TEST(ApproximateAccountingTest, SummedDeltaAtTheDatasetsDeltaIsInfinite) {
  const double delta = 1e-5;
  AccountantState state(NR::kAddRemove);
  ASSERT_TRUE(state.Add(Approx(Discrete(30.0), 0.6e-5)).ok());
  EXPECT_TRUE(std::isfinite(state.Epsilon(delta).value().epsilon));
  const EventCharge second = EventCharge::Of(Approx(Discrete(30.0), 0.4e-5)).value();
  const EpsilonReport after = state.EpsilonIfAdded(second, delta).value();
  EXPECT_TRUE(std::isinf(after.epsilon));
  EXPECT_TRUE(std::isinf(after.epsilon_rdp));
  EXPECT_GE(after.approximate_delta, 1e-5);
  // A smaller one still fits, and the state itself is unchanged.
  const EventCharge small = EventCharge::Of(Approx(Discrete(30.0), 0.3e-5)).value();
  EXPECT_TRUE(std::isfinite(state.EpsilonIfAdded(small, delta).value().epsilon));
  EXPECT_NEAR(state.approximate_delta(), 0.6e-5, 1e-18);
}

// Format 3 carries the sum; a refund takes the state back to the bytes of
// format 1 or 2, so ledgers written before it read unchanged (sum 0).
TEST(ApproximateAccountingTest, SerialisedSumAndRefundsRestoreOldFormats) {
  AccountantState state(NR::kReplaceOne);
  ASSERT_TRUE(state.Add(Discrete(2.0)).ok());
  const std::string before = state.Serialize();
  EXPECT_EQ(before[0], 1);
  const PrivacyEvent a = Approx(Discrete(3.0), 1e-9);
  ASSERT_TRUE(state.Add(a).ok());
  const std::string with = state.Serialize();
  EXPECT_EQ(with[0], 3);
  EXPECT_EQ(with.size(), before.size() + 24 + 16);
  const AccountantState back = AccountantState::Deserialize(with).value();
  EXPECT_TRUE(back == state);
  EXPECT_GE(back.approximate_delta(), 1e-9);
  EXPECT_EQ(back.Epsilon(1e-5).value().epsilon, state.Epsilon(1e-5).value().epsilon);
  ASSERT_TRUE(state.Subtract(a).ok());
  EXPECT_EQ(state.Serialize(), before);
  EXPECT_EQ(AccountantState::Deserialize(before).value().approximate_delta(), 0.0);
  // A refund of an approximate event the state never had is refused.
  EXPECT_FALSE(state.Subtract(Approx(Discrete(2.0), 1e-9)).ok());
  // Truncated format 3 is refused.
  EXPECT_FALSE(AccountantState::Deserialize(with.substr(0, with.size() - 16)).ok());
}

}  // namespace
}  // namespace dpcurator::privacy
