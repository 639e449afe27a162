// The audit of parallel composition (issue 27 item 1; docs/privacy.md 3.7):
// the partitioned releases under each relation are not flagged and are
// tight, and the mutant whose partitioned marginals plan is charged as one
// part only (issue 37: the plan's event replaced after PlanRelease) is
// caught by the canary that changes parts under REPLACE_ONE, beside the
// unmutated plan case at the same target and runs.

#include <iostream>
#include <string>
#include <vector>

#include "audit/mutants.h"
#include "audit/partition_cases.h"
#include "audit/runner.h"
#include "gtest/gtest.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;

TEST(PartitionAudit, ChargedOnePartIsCaught) {
  const std::vector<AuditCase> mutants = MutantCases();
  const AuditCase* mutant = nullptr;
  for (const AuditCase& c : mutants) {
    if (c.kind.rfind("mutant:partition_charged_one_part/", 0) == 0) mutant = &c;
  }
  ASSERT_NE(mutant, nullptr);
  ASSERT_TRUE(mutant->mutant);
  const AuditTarget target = mutant->targets.front();
  AuditOptions options;
  options.runs_per_side = mutant->quick_runs;
  const absl::StatusOr<AuditRow> caught = RunAudit(*mutant, target, options);
  ASSERT_TRUE(caught.ok()) << caught.status();
  const absl::StatusOr<AuditRow> control =
      RunAudit(PartitionedMarginalsCase(NeighbouringRelation::kReplaceOne), target, options);
  ASSERT_TRUE(control.ok()) << control.status();
  const AuditRow rows[] = {*caught, *control};
  std::cout << FormatAuditTable(rows);
  EXPECT_GT(caught->bound.epsilon, caught->accounted_epsilon);
  EXPECT_LE(control->bound.epsilon, control->accounted_epsilon);
  // Only the charge differs: the same plan's mechanism, a smaller event.
  EXPECT_LT(caught->accounted_epsilon, control->accounted_epsilon);
}

TEST(PartitionAudit, ShippedChargeIsTightUnderEachRelation) {
  std::vector<AuditRow> rows;
  for (const AuditCase& c : PartitionCases()) {
    for (const AuditTarget& target : c.targets) {
      const absl::StatusOr<AuditRow> row = RunAudit(c, target);
      ASSERT_TRUE(row.ok()) << row.status();
      EXPECT_FALSE(row->violation()) << c.relation;
      EXPECT_TRUE(row->tight()) << c.relation << " mu_emp " << row->mu_emp << " of "
                                << row->accounted_mu;
      rows.push_back(*row);
    }
  }
  std::cout << FormatAuditTable(rows);
}

}  // namespace
}  // namespace dpcurator::audit
