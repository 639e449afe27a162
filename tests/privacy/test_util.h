#ifndef DPCURATOR_TESTS_PRIVACY_TEST_UTIL_H_
#define DPCURATOR_TESTS_PRIVACY_TEST_UTIL_H_

#include <cmath>
#include <cstdint>

#include "core/privacy/events.h"
#include "gtest/gtest.h"

namespace dpcurator::privacy::testing {

// Upper quantile of N(0,1): the z with P[Z > z] = level, by bisection on
// erfc (monotone), to far below the precision the tests need.
inline double NormalUpperQuantile(double level) {
  double lo = 0.0, hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > level ? lo : hi) = mid;
  }
  return hi;
}

// Upper `level` quantile of chi-square with df degrees of freedom, by the
// Wilson-Hilferty cube-root normal approximation (slightly conservative in
// the far tail for small df, which only makes a correct sampler pass more
// easily; the samplers' power tests show it still rejects wrong laws).
inline double ChiSquareCritical(int df, double level) {
  const double h = 2.0 / (9.0 * df);
  const double c = 1.0 - h + NormalUpperQuantile(level) * std::sqrt(h);
  return df * c * c * c;
}

struct ChiSquare {
  double statistic = 0.0;
  int df = 0;
};


// T steps of the Poisson-sampled Gaussian.
inline PrivacyEvent PoissonSteps(double q, double s, int64_t steps) {
  return PrivacyEvent::SelfCompose(
             PrivacyEvent::PoissonSampledGaussian(q, s).value(), steps)
      .value();
}

// T steps of the without-replacement sampled Gaussian.
inline PrivacyEvent WorSteps(double q, double s, int64_t steps) {
  return PrivacyEvent::SelfCompose(
             PrivacyEvent::SampledWithoutReplacementGaussian(q, s).value(), steps)
      .value();
}

inline ::testing::AssertionResult RelNear(double actual, double expected,
                                          double rel) {
  if (std::fabs(actual - expected) <= rel * std::fabs(expected)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "actual " << actual << " vs expected " << expected
         << " (relative error " << std::fabs(actual - expected) / std::fabs(expected)
         << " > " << rel << ")";
}

}  // namespace dpcurator::privacy::testing

#endif  // DPCURATOR_TESTS_PRIVACY_TEST_UTIL_H_
