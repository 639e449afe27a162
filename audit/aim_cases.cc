#include "audit/aim_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "audit/plan_fixture.h"
#include "Eigen/Core"
#include "core/data/discretize.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/privacy/exponential_mechanism.h"
#include "core/release/marginals.h"
#include "core/util/status_macros.h"
#include "plan/releases.h"
#include "proto/convert.h"
#include "proto/release_kinds.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;

constexpr int kColumns = 3;
// Rows in each of D0's two groups, (0, 0, 1) and (1, 1, 0): large beside the
// noise (a round's std is about 10 to 20 rows at the audited targets), so
// the 1-way model's errors on the pairs (a quarter of the rows in each cell)
// dominate the first selections' scores.
constexpr int kRowsPerGroup = 100;
// The smallest probability a replayed selection's law is read as (a pick the
// charged law gives less than this, only a mutant's, scores as if it had it).
constexpr double kMinPickProbability = 1e-300;

// Everything a run and its score read, built once per target.
struct AimGame {
  plan::ReleasePlan plan;
  v1::Dataset dataset;
  data::Schema schema;
  data::Table rows[2];  // D0, D1
  std::vector<int> domain_sizes;
  // Each candidate's exact table on D0 and D1 (the plan's candidate order),
  // and the index of each clique.
  std::vector<Eigen::VectorXd> truth[2];
  std::map<std::vector<int>, int> candidate_of;
  double marginal_sensitivity = 1.0;
  double score_sensitivity = 1.0;
  // The label rounds' score sensitivity (weight 1: core/train/aim.h RunAim).
  double label_score_sensitivity = 1.0;
  // The statistic's hypothesis on the selections: each is scored by the
  // exponential mechanism's law at this factor times its released epsilon.
  double selection_law_factor = 1.0;
  // The rounds the statistic reads: all of them, or only the label rounds
  // (AimAuditScope::kThroughLabelRound), whose released parameters every
  // run must repeat (`label_rounds`, from the dry run).
  AimAuditScope scope = AimAuditScope::kTranscript;
  std::vector<v1::AimRoundRecord> label_rounds;
};

// Everything that tells one AIM case from another.
struct AimCaseSpec {
  std::string kind;
  NeighbouringRelation relation = NeighbouringRelation::kAddRemove;
  bool label = false;  // column a declared the schema's label
  AimAuditScope scope = AimAuditScope::kTranscript;
  int rounds_per_column = kAimAuditRoundsPerColumn;
  train::AimMutation mutation;
  double selection_law_factor = 1.0;
};

data::Schema GameSchema(bool label) {
  data::Schema::Builder builder;
  for (const char* name : {"a", "b", "c"}) builder.AddCategorical(name, {"0", "1"});
  if (label) builder.SetLabel("a");
  return *builder.Build();
}

// The rows as data::Table stores categoricals (the level's index).
data::Table TableOf(const std::vector<std::array<int, kColumns>>& rows) {
  data::Table table;
  table.cells.resize(static_cast<Eigen::Index>(rows.size()), kColumns);
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int c = 0; c < kColumns; ++c) table.cells(static_cast<Eigen::Index>(r), c) = rows[r][c];
  }
  return table;
}

// log p(transcript | D1) - log p(transcript | D0) under the charged
// parameters (docs/privacy.md 7.1, "aim"): the Gaussian term of every
// released table, plus every selection's term from the exponential
// mechanism's law (at selection_law_factor x eps_k), replayed against the server's
// estimator refitted on the released measurements in the order the run
// fitted them.
absl::StatusOr<double> TranscriptLogLikelihoodRatio(const AimGame& game,
                                                    const v1::AimArtefact& artefact) {
  double measurements = 0.0;
  auto add_table = [&](const release::NoisyMarginal& m) -> absl::Status {
    const auto it = game.candidate_of.find(m.clique);
    if (it == game.candidate_of.end()) {
      return absl::InternalError("aim audit: a released table is no candidate");
    }
    const double variance = m.noise_std * m.noise_std;
    if (!(variance > 0.0)) return absl::OkStatus();
    const Eigen::VectorXd& t0 = game.truth[0][it->second];
    const Eigen::VectorXd& t1 = game.truth[1][it->second];
    // Gaussian y ~ N(t, sigma^2 I): log N(y; t1) - log N(y; t0).
    measurements += (m.counts - 0.5 * (t0 + t1)).dot(t1 - t0) / variance;
    return absl::OkStatus();
  };
  std::vector<release::NoisyMarginal> fitted;
  std::vector<std::vector<int>> measured;
  for (const v1::NoisyMarginalTable& table : artefact.one_way()) {
    fitted.push_back(NoisyMarginalFromProto(table));
    measured.push_back(fitted.back().clique);
    DPC_RETURN_IF_ERROR(add_table(fitted.back()));
  }
  const plan::ReleasePlan::Aim& aim = *game.plan.aim;
  // The server's estimator (plan/releases.cc ComputeAimRelease). Every
  // candidate passes the size filter in every round: the model over three
  // binary columns never exceeds 8 cells, far below the filter's limit.
  train::PgmAimModel model(game.domain_sizes, train::kAimRoundFitIterations,
                           aim.max_model_cells);
  model.Fit(fitted);
  double selections = 0.0;
  const int rounds_read = game.scope == AimAuditScope::kThroughLabelRound
                              ? aim.budget.label_rounds
                              : artefact.rounds_size();
  std::vector<int> eligible;
  std::vector<double> scores[2];
  for (int r = 0; r < rounds_read; ++r) {
    const v1::AimRoundRecord& round = artefact.rounds(r);
    const double sigma = round.noise_multiplier() * game.marginal_sensitivity;
    // The round's candidates as RunAim takes them (core/train/aim.h): the
    // budget's label rounds come first and choose among the label's pairs
    // not yet measured, each at weight 1 (docs/privacy.md 2.12); any other
    // round, or a label round with no such pair left, among every
    // candidate at its weight.
    eligible.clear();
    if (r < aim.budget.label_rounds) {
      for (size_t k = 0; k < aim.candidates.size(); ++k) {
        const std::vector<int>& clique = aim.candidates[k].clique;
        if (clique.size() == 2 &&
            (clique[0] == aim.budget.label || clique[1] == aim.budget.label) &&
            std::find(measured.begin(), measured.end(), clique) == measured.end()) {
          eligible.push_back(static_cast<int>(k));
        }
      }
    }
    const bool label_round = !eligible.empty();
    if (!label_round) {
      for (size_t k = 0; k < aim.candidates.size(); ++k) eligible.push_back(static_cast<int>(k));
    }
    for (int side = 0; side < 2; ++side) {
      scores[side].clear();
      for (const int k : eligible) {
        const train::AimCandidate& c = aim.candidates[k];
        scores[side].push_back(train::AimScore(game.truth[side][k], model.Marginal(c.clique),
                                               label_round ? 1.0 : c.weight, sigma));
      }
    }
    const double score_sensitivity =
        label_round ? game.label_score_sensitivity : game.score_sensitivity;
    DPC_ASSIGN_OR_RETURN(const std::vector<double> p0,
                         privacy::ExponentialMechanismProbabilities(
                             scores[0], round.selection_epsilon() * game.selection_law_factor,
                             score_sensitivity));
    DPC_ASSIGN_OR_RETURN(const std::vector<double> p1,
                         privacy::ExponentialMechanismProbabilities(
                             scores[1], round.selection_epsilon() * game.selection_law_factor,
                             score_sensitivity));
    fitted.push_back(NoisyMarginalFromProto(round.measurement()));
    const auto it = game.candidate_of.find(fitted.back().clique);
    const auto pick = it == game.candidate_of.end()
                          ? eligible.end()
                          : std::find(eligible.begin(), eligible.end(), it->second);
    if (pick == eligible.end()) {
      return absl::InternalError("aim audit: a round measured no candidate it could select");
    }
    const size_t i = static_cast<size_t>(pick - eligible.begin());
    selections += std::log(std::max(p1[i], kMinPickProbability)) -
                  std::log(std::max(p0[i], kMinPickProbability));
    measured.push_back(fitted.back().clique);
    DPC_RETURN_IF_ERROR(add_table(fitted.back()));
    model.Fit(fitted);
  }
  return measurements + selections;
}

// The label rounds' released parameters (noise multiplier, selection
// epsilon, the schedule's sum after them) are the dry run's: the prefix's
// charge was read from there. In the audited games they always are (the
// rows estimated from the 1-way tables, about 200, stay far below
// kAimLabelRoundRowsPerSigma times the first round's noise), so a
// difference is a bug of the case, not a finding.
absl::Status CheckLabelRoundsAsCharged(const AimGame& game, const v1::AimArtefact& artefact) {
  if (artefact.rounds_size() < static_cast<int>(game.label_rounds.size())) {
    return absl::InternalError("aim audit: a run has fewer rounds than the label rounds");
  }
  for (size_t r = 0; r < game.label_rounds.size(); ++r) {
    const v1::AimRoundRecord& ran = artefact.rounds(static_cast<int>(r));
    const v1::AimRoundRecord& charged = game.label_rounds[r];
    if (ran.noise_multiplier() != charged.noise_multiplier() ||
        ran.selection_epsilon() != charged.selection_epsilon() ||
        ran.rho_used() != charged.rho_used()) {
      return absl::InternalError(
          "aim audit: a label round ran at other parameters than the prefix's charge");
    }
  }
  return absl::OkStatus();
}

AuditCase MakeAimCase(const AimCaseSpec& spec) {
  AuditCase c;
  c.kind = spec.kind;
  c.relation = privacy::RelationName(spec.relation);
  c.tightness = Tightness::kNone;
  c.quick_runs = 1000;
  c.full_runs = 20000;
  c.targets = {{1.0, 1e-5}, {1.0, 1e-2}};
  c.prepare = [spec](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    const NeighbouringRelation relation = spec.relation;
    auto game = std::make_shared<AimGame>();
    game->schema = GameSchema(spec.label);
    game->selection_law_factor = spec.selection_law_factor;
    game->scope = spec.scope;
    std::vector<std::array<int, kColumns>> d0;
    for (int i = 0; i < kRowsPerGroup; ++i) d0.push_back({0, 0, 1});
    for (int i = 0; i < kRowsPerGroup; ++i) d0.push_back({1, 1, 0});
    d0.push_back({0, 0, 0});
    std::vector<std::array<int, kColumns>> d1 = d0;
    if (relation == NeighbouringRelation::kAddRemove) {
      d1.push_back({1, 1, 1});
    } else {
      d1.back() = {1, 1, 1};
    }
    game->rows[0] = TableOf(d0);
    game->rows[1] = TableOf(d1);

    // The dataset and request as the server holds them; REPLACE_ONE's public
    // n is D0's (and D1's) row count.
    game->dataset = DatasetRecord(game->schema, relation, target.delta,
                                  static_cast<int64_t>(d0.size()), "audit_aim");
    const v1::Dataset& dataset = game->dataset;
    v1::ReleaseRequest request;
    request.set_dataset_id(dataset.id());
    request.set_idempotency_key("audit_aim");
    request.set_epsilon(target.epsilon);
    // 0 leaves `rounds` unset: the server's default T = 16 d.
    if (spec.rounds_per_column > 0) {
      request.mutable_aim()->set_rounds(spec.rounds_per_column * kColumns);
    } else {
      request.mutable_aim();
    }
    DPC_ASSIGN_OR_RETURN(game->plan, plan::PlanRelease(request, dataset, game->schema));
    if (!game->plan.aim.has_value() || !game->plan.event.has_value()) {
      return absl::InternalError("aim audit: the plan is no aim plan");
    }
    if (spec.label && game->plan.aim->budget.label_rounds <= 0) {
      return absl::InternalError("aim audit: the label game's plan has no label round");
    }
    // A planted bug edits the plan after PlanRelease returned: the event
    // (the charge) stays the one the plan computed.
    game->plan.aim->mutation = spec.mutation;

    DPC_ASSIGN_OR_RETURN(const data::Discretizer domain, data::Discretizer::Create(game->schema));
    for (int col = 0; col < kColumns; ++col) game->domain_sizes.push_back(domain.domain_size(col));
    const Eigen::MatrixXi codes[2] = {domain.Encode(game->rows[0]),
                                      domain.Encode(game->rows[1])};
    const std::vector<train::AimCandidate>& candidates = game->plan.aim->candidates;
    for (size_t k = 0; k < candidates.size(); ++k) {
      std::vector<int> shape;
      for (int col : candidates[k].clique) shape.push_back(game->domain_sizes[col]);
      for (int side = 0; side < 2; ++side) {
        game->truth[side].push_back(
            release::ExactMarginal(candidates[k].clique, shape, codes[side]));
      }
      game->candidate_of[candidates[k].clique] = static_cast<int>(k);
    }
    // One marginal's L2 sensitivity (docs/privacy.md 2.11), which the
    // rounds' noise multipliers are relative to, and the scores'.
    game->marginal_sensitivity =
        relation == NeighbouringRelation::kReplaceOne ? std::sqrt(2.0) : 1.0;
    game->score_sensitivity = train::AimScoreSensitivity(candidates, relation);
    // The label rounds score at weight 1 (RunAim): the same bound with
    // every weight 1.
    train::AimCandidate unit;
    unit.weight = 1.0;
    game->label_score_sensitivity = train::AimScoreSensitivity({unit}, relation);

    // A dry run's released parameters: the multipliers mu is read from and,
    // for the prefix scope, the label rounds' parameters and the schedule's
    // sum after them.
    PreparedCase prepared;
    privacy::ZeroNoiseSource zero;
    DPC_ASSIGN_OR_RETURN(const v1::Release dry,
                         plan::ComputeAimRelease(game->plan, dataset, game->schema,
                                                 game->rows[0], "audit_aim_dry", 1.0, &zero));
    const int label_rounds = game->plan.aim->budget.label_rounds;
    if (dry.aim().rounds_size() < label_rounds) {
      return absl::InternalError("aim audit: the dry run ran fewer rounds than the label rounds");
    }
    const int rounds_read =
        spec.scope == AimAuditScope::kThroughLabelRound ? label_rounds : dry.aim().rounds_size();

    // The charge. The whole transcript: the plan's event through the
    // accountant, as the ledger. The prefix through the label rounds: the
    // same accountant on zcdp of the schedule's released running sum after
    // them (the 1-way release and the label rounds, whose parameters the
    // plan fixes: the prefix is a fixed composition of a Gaussian, then
    // label_rounds (exponential mechanism, Gaussian) pairs, each at the
    // zCDP the schedule charges for it; docs/privacy.md 7.3).
    if (spec.scope == AimAuditScope::kThroughLabelRound) {
      if (label_rounds <= 0) {
        return absl::InternalError("aim audit: the prefix scope needs a label round");
      }
      for (int r = 0; r < label_rounds; ++r) game->label_rounds.push_back(dry.aim().rounds(r));
      const double prefix_rho = game->label_rounds.back().rho_used();
      DPC_ASSIGN_OR_RETURN(const privacy::PrivacyEvent prefix,
                           privacy::PrivacyEvent::Zcdp(prefix_rho));
      DPC_RETURN_IF_ERROR(ChargePlanEvent(prefix, relation, target.delta, &prepared));
    } else {
      DPC_RETURN_IF_ERROR(
          ChargePlanEvent(*game->plan.event, relation, target.delta, &prepared));
    }

    // mu of the measurements the statistic reads, from the dry run's
    // released multipliers: the canary moves every table by its sensitivity
    // (one cell under ADD_REMOVE, two under REPLACE_ONE), so each
    // measurement at multiplier s adds 1 / s^2 to mu^2 (the 1-way release
    // at s1 is one Gaussian over all d tables at sensitivity sqrt(d) or
    // sqrt(2 d): 1 / s1^2).
    const double s1 = dry.aim().one_way_noise_multiplier();
    double mu_squared = 1.0 / (s1 * s1);
    for (int r = 0; r < rounds_read; ++r) {
      const double s = dry.aim().rounds(r).noise_multiplier();
      mu_squared += 1.0 / (s * s);
    }

    prepared.accounted_mu = std::sqrt(mu_squared);
    const double epsilon_alone = prepared.accounted_epsilon;
    prepared.run_and_score = [game, epsilon_alone](
                                 int side, privacy::NoiseSource* noise) -> absl::StatusOr<double> {
      DPC_ASSIGN_OR_RETURN(const v1::Release release,
                           plan::ComputeAimRelease(game->plan, game->dataset, game->schema,
                                                   game->rows[side], "audit_aim", epsilon_alone,
                                                   noise));
      if (game->scope == AimAuditScope::kThroughLabelRound) {
        DPC_RETURN_IF_ERROR(CheckLabelRoundsAsCharged(*game, release.aim()));
      }
      return TranscriptLogLikelihoodRatio(*game, release.aim());
    };
    return prepared;
  };
  return c;
}

}  // namespace

AuditCase AimCase(NeighbouringRelation relation, int rounds_per_column,
                  const train::AimMutation& mutation, double selection_law_factor) {
  AimCaseSpec spec;
  spec.kind = "aim";
  spec.relation = relation;
  spec.rounds_per_column = rounds_per_column;
  spec.mutation = mutation;
  spec.selection_law_factor = selection_law_factor;
  return MakeAimCase(spec);
}

AuditCase AimLabelCase(NeighbouringRelation relation, AimAuditScope scope, int rounds_per_column,
                       const train::AimMutation& mutation) {
  AimCaseSpec spec;
  spec.kind = scope == AimAuditScope::kThroughLabelRound ? "aim(label, through label round)"
                                                         : "aim(label)";
  spec.relation = relation;
  spec.label = true;
  spec.scope = scope;
  spec.rounds_per_column = rounds_per_column;
  spec.mutation = mutation;
  return MakeAimCase(spec);
}

std::vector<AuditCase> AimCases() {
  std::vector<AuditCase> cases = {AimCase(NeighbouringRelation::kAddRemove),
                                  AimCase(NeighbouringRelation::kReplaceOne)};
  for (const NeighbouringRelation relation :
       {NeighbouringRelation::kAddRemove, NeighbouringRelation::kReplaceOne}) {
    AuditCase label = AimLabelCase(relation);
    // CI's quick audit at (1, 1e-2) only, to keep its time flat (at 1e-5 a
    // thousand runs see none of the tail the charge is made of: eps_lb95 0
    // for aim); bench/audit and `dpcurator audit` run every delta asked.
    label.targets = {{1.0, 1e-2}};
    cases.push_back(std::move(label));
  }
  return cases;
}

}  // namespace dpcurator::audit
