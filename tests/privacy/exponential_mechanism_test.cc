// The exponential mechanism (core/privacy/exponential_mechanism.h) and its
// event: RDP and codec against hand values, the draw's law.

#include "core/privacy/exponential_mechanism.h"

#include <cmath>
#include <vector>

#include "core/privacy/conversion.h"
#include "core/privacy/event_codec.h"
#include "core/privacy/events.h"
#include "core/privacy/rdp.h"
#include "gtest/gtest.h"

namespace dpcurator::privacy {
namespace {

TEST(ExponentialMechanismEventTest, RdpIsMinOfZcdpAndPureDp) {
  // rho = eps^2 / 8: eps = 1 gives 0.125 alpha, capped at eps = 1.
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(1.0, 2.0), 0.25);
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(1.0, 8.0), 1.0);
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(1.0, 20.0), 1.0);
  EXPECT_DOUBLE_EQ(ExponentialMechanismRdp(0.2, 10.0), 10 * 0.04 / 8);
  const PrivacyEvent event = PrivacyEvent::ExponentialMechanism(0.2).value();
  EXPECT_TRUE(event.IsValidFor(NeighbouringRelation::kAddRemove));
  EXPECT_TRUE(event.IsValidFor(NeighbouringRelation::kReplaceOne));
  const auto& orders = DefaultRdpOrders();
  const std::vector<double> rdp = ComputeRdp(event, orders).value();
  for (size_t i = 0; i < orders.size(); ++i) {
    EXPECT_DOUBLE_EQ(rdp[i], std::min(orders[i] * 0.005, 0.2));
  }
  // 14 such steps (MST on 15 columns) compose to rho = 14 x 0.005.
  const PrivacyEvent steps = PrivacyEvent::SelfCompose(event, 14).value();
  EXPECT_NEAR(ComputeRdp(steps, {{3.0}}).value()[0], 3.0 * 14 * 0.005, 1e-15);
  EXPECT_FALSE(PrivacyEvent::ExponentialMechanism(0.0).ok());
  EXPECT_FALSE(PrivacyEvent::ExponentialMechanism(INFINITY).ok());
}

TEST(ExponentialMechanismEventTest, CodecRoundTrip) {
  const PrivacyEvent event = PrivacyEvent::ExponentialMechanism(0.125).value();
  EXPECT_EQ(EncodeEvent(event), "exponential(0.125)");
  const PrivacyEvent decoded = DecodeEvent("repeat(3;exponential(0.125))").value();
  EXPECT_EQ(EncodeEvent(decoded), "repeat(3;exponential(0.125))");
  EXPECT_EQ(Describe(event), "ExponentialMechanism(eps=0.125)");
  EXPECT_FALSE(DecodeEvent("exponential(-1)").ok());
}

TEST(ExponentialMechanismTest, ProbabilitiesByHand) {
  // q = (0, 1), eps = 2, Delta = 1: weights 1 and e.
  const auto p = ExponentialMechanismProbabilities({0.0, 1.0}, 2.0, 1.0).value();
  EXPECT_NEAR(p[1], std::exp(1.0) / (1.0 + std::exp(1.0)), 1e-15);
  // Sensitivity 2 halves the exponent.
  const auto half = ExponentialMechanismProbabilities({0.0, 1.0}, 2.0, 2.0).value();
  EXPECT_NEAR(half[1], std::exp(0.5) / (1.0 + std::exp(0.5)), 1e-15);
  // The eps-DP ratio: shifting one score by Delta changes no probability by
  // more than e^eps.
  const auto a = ExponentialMechanismProbabilities({0.0, 3.0, 1.0}, 0.7, 1.0).value();
  const auto b = ExponentialMechanismProbabilities({1.0, 3.0, 1.0}, 0.7, 1.0).value();
  for (int i = 0; i < 3; ++i) EXPECT_LE(std::fabs(std::log(a[i] / b[i])), 0.7 + 1e-12);
}

TEST(ExponentialMechanismTest, GumbelMaxDrawsTheMechanismsLaw) {
  const std::vector<double> q = {0.0, 1.0, 2.0, 0.5};
  const auto p = ExponentialMechanismProbabilities(q, 1.5, 1.0).value();
  SeededNoiseSource noise(21);
  const int draws = 40000;
  std::vector<int> counts(q.size(), 0);
  for (int i = 0; i < draws; ++i) ++counts[ExponentialMechanismSelect(q, 1.5, 1.0, &noise).value()];
  double chi2 = 0.0;
  for (size_t i = 0; i < q.size(); ++i) {
    const double expected = p[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  // 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
  EXPECT_LT(chi2, 16.27);
  // Without noise: the best candidate.
  ZeroNoiseSource zero;
  EXPECT_EQ(ExponentialMechanismSelect(q, 1.5, 1.0, &zero).value(), 2);
  EXPECT_FALSE(ExponentialMechanismSelect({}, 1.0, 1.0, &noise).ok());
  EXPECT_FALSE(ExponentialMechanismSelect({NAN}, 1.0, 1.0, &noise).ok());
}

}  // namespace
}  // namespace dpcurator::privacy
