// CI's quick audit (issue 23 item 3; docs/privacy.md 7.4): every registered
// case at each of its targets, with fixed seeds, fails when a 95% lower
// bound exceeds the accounted epsilon (a privacy bug) or when a case is not
// as tight as the issue demands (mu_emp >= 0.9 mu for one-shot Gaussian
// kinds, eps_lb >= 0.7 eps for Laplace and the exponential mechanism).

#include <cctype>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "audit/registry.h"
#include "audit/runner.h"
#include "gtest/gtest.h"

namespace dpcurator::audit {

// gtest names a failing case by this, not by its bytes.
void PrintTo(const AuditCase& c, std::ostream* os) { *os << c.kind << " " << c.relation; }

namespace {

class QuickAudit : public ::testing::TestWithParam<AuditCase> {};

TEST_P(QuickAudit, NoViolationAndTight) {
  const AuditCase& audit_case = GetParam();
  std::vector<AuditRow> rows;
  for (const AuditTarget& target : audit_case.targets) {
    const absl::StatusOr<AuditRow> row = RunAudit(audit_case, target);
    ASSERT_TRUE(row.ok()) << row.status();
    rows.push_back(*row);
    EXPECT_FALSE(row->violation())
        << audit_case.kind << " " << audit_case.relation << ": lower bound " << row->bound.epsilon
        << " exceeds the accounted epsilon " << row->accounted_epsilon;
    EXPECT_TRUE(row->tight()) << audit_case.kind << " " << audit_case.relation
                              << ": mu_emp " << row->mu_emp << " of mu " << row->accounted_mu
                              << ", eps_lb " << row->bound.epsilon << " of "
                              << row->accounted_epsilon;
  }
  std::cout << FormatAuditTable(rows);
}

std::string CaseName(const ::testing::TestParamInfo<AuditCase>& info) {
  std::string name = info.param.kind + "_" + info.param.relation;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllCases, QuickAudit, ::testing::ValuesIn(AllCases()), CaseName);

}  // namespace
}  // namespace dpcurator::audit
