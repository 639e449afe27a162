#ifndef DPCURATOR_TESTS_PRIVACY_TEST_UTIL_H_
#define DPCURATOR_TESTS_PRIVACY_TEST_UTIL_H_

#include <cmath>
#include <cstdint>

#include "core/privacy/events.h"
#include "gtest/gtest.h"

namespace dpcurator::privacy::testing {

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
