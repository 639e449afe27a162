#include "audit/aim_cases.h"

#include <memory>
#include <utility>

#include "core/privacy/accounting.h"
#include "core/privacy/events.h"
#include "core/train/aim.h"
#include "core/util/status_macros.h"

namespace dpcurator::audit {

using privacy::NeighbouringRelation;

AuditCase AimCase(NeighbouringRelation relation) {
  AuditCase c;
  c.kind = "aim";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kNone;
  c.quick_runs = 20000;
  c.full_runs = 200000;
  c.targets = {{1.0, 1e-5}};
  c.prepare = [relation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    const std::vector<int> domain = {3, 2};
    constexpr int kRounds = 2;
    // The plan's own calls (server/releases.cc PlanAimRelease).
    DPC_ASSIGN_OR_RETURN(const train::AimBudget budget,
                         train::CalibrateAimBudget(2, kRounds, target.epsilon, target.delta));
    DPC_ASSIGN_OR_RETURN(std::vector<train::AimCandidate> candidates,
                         train::AimCandidates(train::DefaultAimWorkload(2, std::nullopt), domain));
    DPC_RETURN_IF_ERROR(train::CheckAimRunnable(domain, candidates, budget,
                                                train::kDefaultAimMaxModelCells, relation));
    DPC_ASSIGN_OR_RETURN(const privacy::PrivacyEvent event, train::AimEvent(budget));
    privacy::AccountantState state(relation);
    DPC_RETURN_IF_ERROR(state.Add(event));
    DPC_ASSIGN_OR_RETURN(const privacy::EpsilonReport report, state.Epsilon(target.delta));
    PreparedCase prepared;
    prepared.accounted_epsilon = report.epsilon;
    prepared.delta = target.delta;
    Eigen::MatrixXi d0(3, 2);
    d0 << 0, 0, 1, 0, 0, 0;
    Eigen::MatrixXi d1;
    const Eigen::RowVector2i canary(2, 1);
    const Eigen::RowVector2i replaced = d0.row(0);
    if (relation == NeighbouringRelation::kAddRemove) {
      d1.resize(4, 2);
      d1 << d0, canary;
    } else {
      d1 = d0;
      d1.row(0) = canary;
    }
    auto pair = std::make_shared<const std::pair<Eigen::MatrixXi, Eigen::MatrixXi>>(d0, d1);
    auto shared = std::make_shared<const std::vector<train::AimCandidate>>(std::move(candidates));
    const bool replace = relation == NeighbouringRelation::kReplaceOne;
    prepared.run_and_score = [pair, shared, budget, relation, domain, canary, replaced, replace](
                                 int side, privacy::NoiseSource* noise) -> absl::StatusOr<double> {
      train::MeasuredTablesAimModel model(domain);  // the server's estimator
      DPC_ASSIGN_OR_RETURN(
          const train::AimRun run,
          train::RunAim(side == 0 ? pair->first : pair->second, domain, *shared, budget,
                        train::kDefaultAimMaxModelCells, relation, &model, noise));
      // Sum over released tables of y[cell(canary)] / sigma^2 (less the
      // replaced row's cell): the measurements' likelihood-ratio statistic.
      double score = 0.0;
      auto add = [&](const release::NoisyMarginal& m) {
        const double variance = m.noise_std * m.noise_std;
        if (!(variance > 0.0)) return;
        auto cell = [&](const Eigen::RowVector2i& row) {
          int64_t index = 0;
          for (size_t k = 0; k < m.clique.size(); ++k) {
            index = index * m.shape[k] + row[m.clique[k]];
          }
          return index;
        };
        score += m.counts[cell(canary)] / variance;
        if (replace) score -= m.counts[cell(replaced)] / variance;
      };
      for (const auto& m : run.one_way) add(m);
      for (const auto& r : run.rounds) add(r.measurement);
      return score;
    };
    return prepared;
  };
  return c;
}

std::vector<AuditCase> AimCases() {
  return {AimCase(NeighbouringRelation::kAddRemove), AimCase(NeighbouringRelation::kReplaceOne)};
}

}  // namespace dpcurator::audit
