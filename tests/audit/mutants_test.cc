// The audit's power (issue 23 item 2; docs/privacy.md 7.3): each planted
// bug, run through the real mechanism with one parameter of the game
// mutated, is caught - the 95% lower bound exceeds the epsilon the ledger
// charges. Each mutant has its own test, and beside it the same case
// unmutated at the same target and runs, which must not be flagged, so a
// pass means the harness told the bug from the shipped code.

#include <iostream>
#include <string>
#include <vector>

#include "audit/aim_cases.h"
#include "audit/mutants.h"
#include "audit/one_shot_cases.h"
#include "audit/plan_fixture.h"
#include "audit/runner.h"
#include "core/data/schema.h"
#include "core/privacy/noise_source.h"
#include "gtest/gtest.h"
#include "plan/releases.h"

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
// `same_mu`: the mutant's plan keeps the charged Gaussians' mu too (AIM's
// seam changes draws only; a one-shot mutant re-plans its record).
constexpr bool kSameMu = true;
void ExpectCaught(const AuditCase& mutant, AuditCase original, bool same_mu = false) {
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
  if (same_mu) {
    EXPECT_DOUBLE_EQ(caught->accounted_mu, control->accounted_mu);
  }
}

// Issue 38: a category fit run at half its calibrated threshold, its
// charge unchanged, publishes a value one row has far above delta_0.
TEST(AuditMutants, CategoryFitThresholdHalvedIsCaught) {
  ExpectCaught(Mutant("fit_threshold_halved"),
               CategoryFitCase(NeighbouringRelation::kAddRemove));
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

// AIM's planted bugs (issue 37 item 1; docs/privacy.md 7.3), planted
// through the plan's train::AimMutation after PlanRelease returned.
TEST(AimMutants, EveryRoundAtHalfTheNoiseIsCaught) {
  ExpectCaught(Mutant("aim_round_noise_halved"), AimCase(NeighbouringRelation::kAddRemove),
               kSameMu);
}

// Caught by the statistic that scores the selections at the suspected law
// (8 eps_k); its control, the shipped mechanism under the same statistic,
// is not flagged.
TEST(AimMutants, SelectionsAtEightTimesTheEpsilonAreCaught) {
  ExpectCaught(Mutant("aim_selection_epsilon_8x"),
               AimCase(NeighbouringRelation::kAddRemove, kAimAuditRoundsPerColumn, {},
                       /*selection_law_factor=*/8.0),
               kSameMu);
}

TEST(AimMutants, OneWayReleaseAtHalfTheNoiseIsCaught) {
  ExpectCaught(Mutant("aim_one_way_noise_halved"),
               AimCase(NeighbouringRelation::kAddRemove, /*rounds_per_column=*/1), kSameMu);
}

// The label round (issue 38) at half its charged noise, caught on the
// label game's prefix through the label round against the prefix's charge
// (aim_cases.h AimAuditScope; docs/privacy.md 7.3); the control, the
// shipped label round under the same scope, statistic and runs.
TEST(AimMutants, TheLabelRoundAtHalfTheNoiseIsCaught) {
  ExpectCaught(Mutant("aim_label_round_noise_halved"),
               AimLabelCase(NeighbouringRelation::kAddRemove, AimAuditScope::kThroughLabelRound,
                            kAimLabelPrefixRoundsPerColumn),
               kSameMu);
}

// The seam: PlanRelease leaves the mutation identity, and a planted factor
// changes the drawn noise (or selection) while the released schedule - each
// round's multiplier, selection epsilon and rho used - stays the charged one.
TEST(AimMutants, TheSeamChangesTheDrawsNotTheSchedule) {
  data::Schema::Builder builder;
  for (const char* name : {"a", "b", "c"}) builder.AddCategorical(name, {"0", "1"});
  const data::Schema schema = *builder.Build();
  data::Table rows;
  rows.cells.resize(40, 3);
  for (int r = 0; r < 40; ++r) {
    rows.cells(r, 0) = r % 2;
    rows.cells(r, 1) = r % 2;
    rows.cells(r, 2) = (r / 2) % 2;
  }
  const v1::Dataset dataset =
      DatasetRecord(schema, NeighbouringRelation::kAddRemove, 1e-5, 40, "seam");
  v1::ReleaseRequest request;
  request.set_dataset_id("seam");
  request.set_epsilon(1.0);
  request.mutable_aim()->set_rounds(12);
  const absl::StatusOr<plan::ReleasePlan> planned = plan::PlanRelease(request, dataset, schema);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_TRUE(planned->aim.has_value());
  EXPECT_EQ(planned->aim->mutation.selection_epsilon_factor, 1.0);
  EXPECT_EQ(planned->aim->mutation.round_noise_factor, 1.0);
  EXPECT_EQ(planned->aim->mutation.one_way_noise_factor, 1.0);

  auto run = [&](const train::AimMutation& mutation) {
    plan::ReleasePlan mutated = *planned;
    mutated.aim->mutation = mutation;
    privacy::SeededNoiseSource noise(7);
    const absl::StatusOr<v1::Release> release =
        plan::ComputeAimRelease(mutated, dataset, schema, rows, "seam", 1.0, &noise);
    EXPECT_TRUE(release.ok()) << release.status();
    return release.ok() ? release->aim() : v1::AimArtefact();
  };
  const v1::AimArtefact shipped = run({});
  ASSERT_GE(shipped.rounds_size(), 1);
  const double one_way_std = shipped.one_way(0).noise_std();
  const double round_std = shipped.rounds(0).measurement().noise_std();

  // The 1-way release drawn at half the noise; the schedule as charged.
  const v1::AimArtefact one_way = run({.one_way_noise_factor = 0.5});
  EXPECT_NEAR(one_way.one_way(0).noise_std(), 0.5 * one_way_std, 1e-3 * one_way_std);
  EXPECT_EQ(one_way.one_way_noise_multiplier(), shipped.one_way_noise_multiplier());
  // The rounds' measurements at half the noise, the multipliers as charged.
  const v1::AimArtefact rounds = run({.round_noise_factor = 0.5});
  EXPECT_EQ(rounds.one_way(0).noise_std(), one_way_std);
  ASSERT_GE(rounds.rounds_size(), 1);
  EXPECT_NEAR(rounds.rounds(0).measurement().noise_std(), 0.5 * round_std, 1e-3 * round_std);
  EXPECT_EQ(rounds.rounds(0).noise_multiplier(), shipped.rounds(0).noise_multiplier());
  // The selections sharper; the released selection epsilon the charged one.
  const v1::AimArtefact selections = run({.selection_epsilon_factor = 8.0});
  ASSERT_GE(selections.rounds_size(), 1);
  EXPECT_EQ(selections.rounds(0).selection_epsilon(), shipped.rounds(0).selection_epsilon());
  EXPECT_EQ(selections.rounds(0).noise_multiplier(), shipped.rounds(0).noise_multiplier());
  for (const v1::AimArtefact* a : {&one_way, &rounds, &selections}) {
    EXPECT_EQ(a->rho(), shipped.rho());
    EXPECT_LE(a->rounds(a->rounds_size() - 1).rho_used(), a->rho());
  }
}

// The label round's seam (issue 38): on a schema with a label the plan
// gives the run one label round, and label_round_noise_factor draws that
// round's table, and no other, at the factor times the charged noise; the
// released multipliers, selection epsilons and running sums stay the plan's.
TEST(AimMutants, TheLabelSeamHalvesTheLabelRoundOnly) {
  data::Schema::Builder builder;
  for (const char* name : {"a", "b", "c"}) builder.AddCategorical(name, {"0", "1"});
  builder.SetLabel("a");
  const data::Schema schema = *builder.Build();
  data::Table rows;
  rows.cells.resize(40, 3);
  for (int r = 0; r < 40; ++r) {
    rows.cells(r, 0) = r % 2;
    rows.cells(r, 1) = r % 2;
    rows.cells(r, 2) = (r / 2) % 2;
  }
  const v1::Dataset dataset =
      DatasetRecord(schema, NeighbouringRelation::kAddRemove, 0.1, 40, "label_seam");
  v1::ReleaseRequest request;
  request.set_dataset_id("label_seam");
  request.set_epsilon(1.0);
  request.mutable_aim()->set_rounds(12);
  const absl::StatusOr<plan::ReleasePlan> planned = plan::PlanRelease(request, dataset, schema);
  ASSERT_TRUE(planned.ok()) << planned.status();
  ASSERT_TRUE(planned->aim.has_value());
  ASSERT_EQ(planned->aim->budget.label_rounds, 1);
  EXPECT_EQ(planned->aim->mutation.label_round_noise_factor, 1.0);

  auto run = [&](const train::AimMutation& mutation) {
    plan::ReleasePlan mutated = *planned;
    mutated.aim->mutation = mutation;
    privacy::SeededNoiseSource noise(11);
    const absl::StatusOr<v1::Release> release =
        plan::ComputeAimRelease(mutated, dataset, schema, rows, "label_seam", 1.0, &noise);
    EXPECT_TRUE(release.ok()) << release.status();
    return release.ok() ? release->aim() : v1::AimArtefact();
  };
  const v1::AimArtefact shipped = run({});
  const v1::AimArtefact halved = run({.label_round_noise_factor = 0.5});
  ASSERT_GE(shipped.rounds_size(), 2);
  ASSERT_EQ(halved.rounds_size(), shipped.rounds_size());
  EXPECT_EQ(halved.one_way(0).noise_std(), shipped.one_way(0).noise_std());
  const double label_std = shipped.rounds(0).measurement().noise_std();
  EXPECT_NEAR(halved.rounds(0).measurement().noise_std(), 0.5 * label_std, 1e-3 * label_std);
  for (int r = 0; r < shipped.rounds_size(); ++r) {
    if (r > 0) {
      EXPECT_EQ(halved.rounds(r).measurement().noise_std(),
                shipped.rounds(r).measurement().noise_std())
          << "round " << r;
    }
    EXPECT_EQ(halved.rounds(r).noise_multiplier(), shipped.rounds(r).noise_multiplier());
    EXPECT_EQ(halved.rounds(r).selection_epsilon(), shipped.rounds(r).selection_epsilon());
    EXPECT_EQ(halved.rounds(r).rho_used(), shipped.rounds(r).rho_used());
  }
}

}  // namespace
}  // namespace dpcurator::audit
