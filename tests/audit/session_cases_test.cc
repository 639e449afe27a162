// Whole-session audits (audit/session_cases.h; issue 23 items 1 and 3):
// for every session step kind and both neighbouring relations, 2N sessions
// of T steps sampled as the server samples, scored by the white-box
// likelihood ratio; the 95% epsilon lower bound must not exceed the
// accounted epsilon. Fixed seeds, so not flaky.
#include "audit/session_cases.h"

#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

namespace dpcurator::audit {
namespace {

class SessionAuditTest : public ::testing::TestWithParam<int> {};

TEST_P(SessionAuditTest, LowerBoundWithinAccountedEpsilon) {
  const SessionAuditConfig config = SessionAuditCases(/*quick=*/true)[GetParam()];
  auto result = RunSessionAudit(config);
  ASSERT_TRUE(result.ok()) << result.status();
  std::printf("%s %s eps %.3f lb %.3f mu_emp %.3f mu_clt %.3f s %.3f q %.3f attain %.3f N %lld %.2fs\n",
              result->kind.c_str(), result->relation.c_str(), result->accounted_epsilon,
              result->bound.epsilon, result->mu_emp, result->mu_clt, result->noise_multiplier,
              result->sampling_rate, result->canary_attainment,
              static_cast<long long>(result->sessions), result->seconds);
  EXPECT_LE(result->bound.epsilon, result->accounted_epsilon);
  // The canary attains the sensitivity bound (up to the kernel's jitter).
  EXPECT_NEAR(result->canary_attainment, 1.0, 1e-3);
  // Power: the audit sees the canary at all.
  EXPECT_GT(result->mu_emp, 0.7 * result->mu_clt);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SessionAuditTest,
                         ::testing::Range(0, static_cast<int>(SessionAuditCases(true).size())));

}  // namespace
}  // namespace dpcurator::audit
