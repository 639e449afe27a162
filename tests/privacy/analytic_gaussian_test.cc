#include "core/privacy/analytic_gaussian.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/privacy/test_util.h"

namespace dpcurator::privacy {
namespace {

using testing::RelNear;

// PRIVACY.md: sigma(eps=1, delta=1e-5) = 3.73063, sigma(1, 1e-6) = 4.22468.
TEST(AnalyticGaussianTest, PrivacyMdSigmas) {
  const double s5 = AnalyticGaussianSigma(1.0, 1e-5, 1.0).value();
  const double s6 = AnalyticGaussianSigma(1.0, 1e-6, 1.0).value();
  EXPECT_NEAR(s5, 3.73063, 5e-6);
  EXPECT_NEAR(s6, 4.22468, 5e-6);
  // Scales with the sensitivity.
  EXPECT_TRUE(RelNear(AnalyticGaussianSigma(1.0, 1e-5, 2.5).value(), 2.5 * s5, 1e-10));
  // Feasible: delta at the returned sigma never exceeds the target.
  EXPECT_LE(AnalyticGaussianDelta(1.0, 1.0 / s5).value(), 1e-5);
  EXPECT_LE(AnalyticGaussianDelta(1.0, 1.0 / s6).value(), 1e-6);
  // ... and tight.
  EXPECT_GT(AnalyticGaussianDelta(1.0, 1.0 / (s5 * (1 - 1e-9))).value(), 1e-5);
}

// PRIVACY.md: one Gaussian with s = 1 at delta = 1e-5: eps = 4.37718.
TEST(AnalyticGaussianTest, EpsilonOfUnitGaussian) {
  EXPECT_TRUE(RelNear(AnalyticGaussianEpsilon(1e-5, 1.0).value(), 4.37718, 1e-6));
}

TEST(AnalyticGaussianTest, DeltaMatchesThmEightDirectly) {
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  for (double mu : {0.1, 0.5, 1.0, 3.0}) {
    for (double eps : {0.0, 0.1, 1.0, 2.0}) {
      const double direct = phi(-eps / mu + mu / 2) - std::exp(eps) * phi(-eps / mu - mu / 2);
      EXPECT_TRUE(RelNear(AnalyticGaussianDelta(eps, mu).value(), direct, 1e-9))
          << mu << " " << eps;
    }
  }
}

TEST(AnalyticGaussianTest, StableForLargeEpsilonAndTinyDelta) {
  // mu = 40: eps around 800 at delta = 1e-300; no overflow, still inverse.
  const double eps = AnalyticGaussianEpsilon(1e-300, 40.0).value();
  EXPECT_TRUE(std::isfinite(eps));
  EXPECT_GT(eps, 800.0);
  EXPECT_TRUE(RelNear(AnalyticGaussianLogDelta(eps, 40.0).value(), std::log(1e-300), 1e-9));
}

TEST(AnalyticGaussianTest, EpsilonInvertsDelta) {
  for (double mu : {0.05, 0.3, 1.0, 2.0, 8.0}) {
    for (double delta = 1e-3; delta > 1e-10 * 0.99; delta /= 10) {
      const double eps = AnalyticGaussianEpsilon(delta, mu).value();
      if (eps == 0.0) {
        EXPECT_LE(AnalyticGaussianDelta(0.0, mu).value(), delta);
        continue;
      }
      // Upper end of a 1e-12 bracket: delta(eps) <= target, barely.
      EXPECT_LE(AnalyticGaussianDelta(eps, mu).value(), delta);
      EXPECT_TRUE(RelNear(AnalyticGaussianDelta(eps, mu).value(), delta, 1e-9))
          << mu << " " << delta;
    }
  }
}

TEST(AnalyticGaussianTest, Validation) {
  EXPECT_FALSE(AnalyticGaussianEpsilon(0.0, 1.0).ok());
  EXPECT_FALSE(AnalyticGaussianEpsilon(1e-5, 0.0).ok());
  EXPECT_FALSE(AnalyticGaussianSigma(0.0, 1e-5, 1.0).ok());
  EXPECT_FALSE(AnalyticGaussianSigma(1.0, 1.0, 1.0).ok());
  EXPECT_FALSE(AnalyticGaussianDelta(-1.0, 1.0).ok());
}

}  // namespace
}  // namespace dpcurator::privacy
