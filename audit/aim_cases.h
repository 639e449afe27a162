#ifndef DPCURATOR_AUDIT_AIM_CASES_H_
#define DPCURATOR_AUDIT_AIM_CASES_H_

// The aim recipe's audit case (issue 26 item 4, issue 37 item 1;
// docs/privacy.md 2.12 and 7.1), built through the server's own plan: a
// v1::ReleaseRequest with `aim` on an in-memory v1::Dataset and schema,
// plan::PlanRelease at the target epsilon (the budget, the workload, the
// candidates, the model-size limit, and the one zcdp(rho) event the ledger
// charges), and for each run plan::ComputeAimRelease on the side's rows (the
// server's estimator, the grid Gaussian and the exact exponential
// mechanism), scored from the v1::Release it returns.
//
// The game: three binary columns (a, b, c); D0 holds 100 rows (0, 0, 1),
// 100 rows (1, 1, 0) and one row (0, 0, 0); the canary (1, 1, 1) is added
// (ADD_REMOVE) or takes the place of (0, 0, 0) (REPLACE_ONE), so every
// released table moves. The default workload (the three pairs) at T = 4 d
// rounds. Under the 1-way model every pair is equally wrong, and the canary
// moves the pairs' scores apart by twice the score sensitivity: (a, b)'s
// error at the canary's cell grows by one row, (a, c)'s and (b, c)'s shrink
// by one (the model puts a quarter of the rows in cells the data leaves
// empty), so the first selections among the pairs see the canary.
//
// The statistic is the log-likelihood ratio of the whole transcript under
// the charged parameters (docs/privacy.md 7.1, "aim"): every released
// table's Gaussian term <y - (t0 + t1) / 2, t1 - t0> / sigma^2, plus every
// selection's log p1(pick) / p0(pick) from the exponential mechanism's exact
// law, its scores recomputed on both sides' true tables against the same
// model the server fitted, replayed from the released measurements. mu is
// that of the measurements: sqrt(sum 1 / s^2) over the 1-way release and the
// rounds, read from a dry run's artefact (the schedule spends 0.9 of every
// round's rho on the measurement, so it is the same for every run).
#include <vector>

#include "audit/audit_case.h"
#include "core/privacy/relation.h"
#include "core/train/aim.h"

namespace dpcurator::audit {

// Rounds per column of the audited request (issue 37: T >= 4 d).
inline constexpr int kAimAuditRoundsPerColumn = 4;

// `rounds_per_column`: the request's rounds / d (1 puts 0.91 of the
// measurements' rho in the 1-way release); `mutation`: a planted bug
// (mutants.cc), written into the plan after PlanRelease returns; identity
// for the shipped case. `selection_law_factor`: the statistic's hypothesis
// on the selections, each scored by the exponential mechanism's law at this
// factor times its released epsilon: 1 (the shipped case) makes the
// statistic the transcript's likelihood ratio; an auditor who suspects the
// selections spend k times their charge sets k, the most powerful test
// against that alternative (any statistic is sound, docs/privacy.md 7.2).
AuditCase AimCase(privacy::NeighbouringRelation relation,
                  int rounds_per_column = kAimAuditRoundsPerColumn,
                  const train::AimMutation& mutation = {}, double selection_law_factor = 1.0);

// The label round (issue 38; docs/privacy.md 2.12 and 7.1, "aim(label)"):
// the same game with column a declared the schema's label, so the plan gives
// the run one label round (core/train/aim.h kAimLabelRounds) and the
// default workload adds the triple (a, b, c). After the 1-way release the
// label round chooses between a's two pairs, (a, b) and (a, c), equally
// wrong under the 1-way model (L1 error about n each), and the canary
// (1, 1, 1) tips that near tie: under ADD_REMOVE it adds a row to (a, b)'s
// cell (1, 1), where the model is below the data (the error grows by one),
// and to (a, c)'s cell (1, 1), where the model is above the data's 0 (the
// error falls by one), so the two weight-1 scores move apart by twice the
// label round's sensitivity; then its measurement, a table the canary
// moves by its full sensitivity, at the label round's share of rho (0.18 of
// it to the Gaussian, 20% of the measurements' mu^2). The statistic replays
// the label round's law (its candidates, weight 1, its sensitivity).
//
// `scope`: what the distinguisher reads and what it is held to.
//  * kTranscript: the whole transcript against the plan's event (the
//    registered case).
//  * kThroughLabelRound: the prefix of the transcript up to the label
//    rounds (the 1-way tables, then each label round's pick and table)
//    against what that prefix is charged, zcdp of the schedule's released
//    running sum after the label rounds (the prefix is a composition of
//    mechanisms whose parameters the plan fixes). A label round at half its
//    noise adds 0.54 rho to a run charged rho, less than the slack of the
//    whole charge's conversion at (1, 0.1): a perfect distinguisher of the
//    whole run would reach about 0.93 to 0.98 of that charge
//    (docs/privacy.md 7.3); against the prefix's, it spends 3.5 times it.
enum class AimAuditScope { kTranscript, kThroughLabelRound };

// Rounds per column of the label round's mutant and its control
// (kThroughLabelRound): at T = 64 d the 1-way release holds 0.9 d / T =
// 0.014 of rho, so the prefix is almost all label round (0.2 rho), and a
// label round at half its noise spends 3.5 times the prefix's charge.
inline constexpr int kAimLabelPrefixRoundsPerColumn = 64;

// `rounds_per_column` 0 leaves the request's rounds unset (the server's
// default, T = 16 d).
AuditCase AimLabelCase(privacy::NeighbouringRelation relation,
                       AimAuditScope scope = AimAuditScope::kTranscript,
                       int rounds_per_column = kAimAuditRoundsPerColumn,
                       const train::AimMutation& mutation = {});

// aim and aim(label), each under ADD_REMOVE and REPLACE_ONE.
std::vector<AuditCase> AimCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_AIM_CASES_H_
