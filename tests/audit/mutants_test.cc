// The audit's power (issue 23 item 2; docs/privacy.md 7.3): each planted
// bug, run through the real mechanism with one parameter of the game
// mutated, is caught - the 95% lower bound exceeds the epsilon the ledger
// charges. Each mutant has its own test, and beside it the same case
// unmutated at the same target and runs, which must not be flagged, so a
// pass means the harness told the bug from the shipped code.

#include <string>

#include "audit/mutants.h"
#include "audit/one_shot_cases.h"
#include "audit/runner.h"
#include "gtest/gtest.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;

const AuditCase& Mutant(const std::string& name) {
  static const std::vector<AuditCase> mutants = MutantCases();
  for (const AuditCase& c : mutants) {
    if (c.kind.rfind("mutant:" + name + "/", 0) == 0) return c;
  }
  ADD_FAILURE() << "no mutant " << name;
  return mutants.front();
}

// Audits `mutant` and its unmutated original with the same target and runs.
void ExpectCaught(const AuditCase& mutant, AuditCase original) {
  ASSERT_TRUE(mutant.mutant);
  ASSERT_EQ(mutant.targets.size(), 1u);
  const AuditTarget target = mutant.targets.front();
  AuditOptions options;
  options.runs_per_side = mutant.quick_runs;
  const absl::StatusOr<AuditRow> caught = RunAudit(mutant, target, options);
  ASSERT_TRUE(caught.ok()) << caught.status();
  const absl::StatusOr<AuditRow> control = RunAudit(original, target, options);
  ASSERT_TRUE(control.ok()) << control.status();
  const AuditRow rows[] = {*caught, *control};
  std::cout << FormatAuditTable(rows);
  EXPECT_GT(caught->bound.epsilon, caught->accounted_epsilon) << mutant.kind;
  EXPECT_LE(control->bound.epsilon, control->accounted_epsilon) << original.kind;
  EXPECT_DOUBLE_EQ(caught->accounted_epsilon, control->accounted_epsilon);
}

TEST(AuditMutants, SigmaHalvedIsCaught) {
  ExpectCaught(Mutant("sigma_halved"), RffEmbeddingCase(NeighbouringRelation::kAddRemove, false));
}

TEST(AuditMutants, FeatureNormClampRemovedIsCaught) {
  ExpectCaught(Mutant("norm_clamp_removed"),
               RffEmbeddingCase(NeighbouringRelation::kAddRemove, false));
}

TEST(AuditMutants, ReplaceOneChargedAsAddRemoveIsCaught) {
  ExpectCaught(Mutant("replace_one_as_add_remove"),
               RffEmbeddingCase(NeighbouringRelation::kReplaceOne, false));
}

TEST(AuditMutants, ExponentialMechanismSensitivityHalvedIsCaught) {
  ExpectCaught(Mutant("em_sensitivity_halved"),
               ExponentialMechanismCase(NeighbouringRelation::kAddRemove));
}

TEST(AuditMutants, LdpRadiusNotEnforcedIsCaught) {
  ExpectCaught(Mutant("ldp_radius_not_enforced"), LdpLaplaceCase());
}

}  // namespace
}  // namespace dpcurator::audit
