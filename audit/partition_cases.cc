#include "audit/partition_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "audit/plan_fixture.h"
#include "core/data/schema.h"
#include "core/data/table.h"
#include "core/privacy/accounting.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/events.h"
#include "core/util/status_macros.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "plan/partition.h"
#include "plan/releases.h"

namespace dpcurator::audit {
namespace {

using privacy::NeighbouringRelation;
using privacy::PrivacyEvent;

inline constexpr int kParts = 3;
// L2 sensitivity of one part's [sum of x; count], x in [0, 1]: a row added
// or removed moves both coordinates by at most 1; a row replaced inside the
// part moves the sum by at most 1 and the count not at all.
inline const double kAddRemoveSensitivity = std::sqrt(2.0);
inline constexpr double kReplaceInsideSensitivity = 1.0;
// Runs per side, as the one-shot Gaussian cases (one_shot_cases.cc).
inline constexpr int64_t kQuickRuns = 40000;

struct Row {
  double x;
  int part;
};

// The rows of D0 and D1 (partition_cases.h).
std::array<std::vector<Row>, 2> Pair(NeighbouringRelation relation) {
  const std::vector<Row> d0 = {{1.0, 0}, {0.3, 0}, {0.5, 1}, {0.7, 2}};
  std::vector<Row> d1 = d0;
  const Row canary{1.0, 1};
  if (relation == NeighbouringRelation::kAddRemove) {
    d1.push_back(canary);
  } else {
    d1[0] = canary;
  }
  return {d0, d1};
}

// The mechanism: every part's [sum of clamped x; count] with its own grid
// noise of multiplier s on sensitivity sqrt 2. Total: every part is
// released whatever the rows hold.
absl::StatusOr<Eigen::VectorXd> Release(const std::vector<Row>& rows, double noise_multiplier,
                                        privacy::NoiseSource* noise) {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(2 * kParts);
  for (int k = 0; k < kParts; ++k) {
    Eigen::VectorXd part = Eigen::VectorXd::Zero(2);
    for (const Row& row : rows) {
      if (row.part != k) continue;
      part(0) += std::clamp(row.x, 0.0, 1.0);
      part(1) += 1.0;
    }
    DPC_RETURN_IF_ERROR(
        privacy::AddGridGaussianNoise(part, noise_multiplier, kAddRemoveSensitivity, noise)
            .status());
    out(2 * k) = part(0);
    out(2 * k + 1) = part(1);
  }
  return out;
}

// What the ledger charges for the release at add/remove multiplier s.
absl::StatusOr<PrivacyEvent> Charge(NeighbouringRelation relation, double s) {
  DPC_ASSIGN_OR_RETURN(const PrivacyEvent part, PrivacyEvent::DiscreteGaussian(s));
  const std::vector<PrivacyEvent> add_remove(kParts, part);
  if (relation == NeighbouringRelation::kAddRemove) {
    return PrivacyEvent::PartitionedAddRemove(add_remove);
  }
  // Inside a part the sensitivity is 1, so the same noise std s sqrt 2 is a
  // multiplier of s sqrt 2 / 1 there.
  DPC_ASSIGN_OR_RETURN(const PrivacyEvent inside,
                       PrivacyEvent::DiscreteGaussian(s * kAddRemoveSensitivity /
                                                      kReplaceInsideSensitivity));
  return PrivacyEvent::PartitionedReplaceOne(add_remove,
                                             std::vector<PrivacyEvent>(kParts, inside));
}

// The partitioned marginals case's rows: (a level, y level) pairs.
std::array<data::Table, 2> MarginalsPair(NeighbouringRelation relation) {
  std::vector<std::array<double, 2>> d0 = {{1, 0}, {0, 0}, {1, 1}, {0, 2}};
  std::vector<std::array<double, 2>> d1 = d0;
  const std::array<double, 2> canary = {1, 1};
  if (relation == NeighbouringRelation::kAddRemove) {
    d1.push_back(canary);
  } else {
    d1[0] = canary;
  }
  std::array<data::Table, 2> tables;
  for (int side = 0; side < 2; ++side) {
    const auto& rows = side == 0 ? d0 : d1;
    tables[side].cells.resize(static_cast<Eigen::Index>(rows.size()), 2);
    for (size_t i = 0; i < rows.size(); ++i) {
      tables[side].cells(static_cast<Eigen::Index>(i), 0) = rows[i][0];
      tables[side].cells(static_cast<Eigen::Index>(i), 1) = rows[i][1];
    }
  }
  return tables;
}

}  // namespace

AuditCase PartitionedCountsCase(NeighbouringRelation relation) {
  AuditCase c;
  c.kind = "partitioned_counts";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kQuickRuns;
  c.full_runs = 400000;
  c.prepare = [relation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    // The noise multiplier the ledger's own charge calls for: the smallest
    // s (to a relative 1e-9) whose charged event costs at most the target,
    // by bisection on the accountant itself, so that a wrong partitioned
    // curve (too small a charge) means too little noise and is caught here,
    // not hidden by a calibration that assumed the right curve. Expected:
    // ADD_REMOVE one part's s1; REPLACE_ONE s1 sqrt 2 (two parts).
    auto cost = [&](double s) -> absl::StatusOr<double> {
      DPC_ASSIGN_OR_RETURN(const PrivacyEvent event, Charge(relation, s));
      privacy::AccountantState state(relation);
      DPC_RETURN_IF_ERROR(state.Add(event));
      DPC_ASSIGN_OR_RETURN(const privacy::EpsilonReport report, state.Epsilon(target.delta));
      return report.epsilon;
    };
    double lo = 1e-3;
    double hi = 1e3;
    while (hi / lo > 1.0 + 1e-9) {
      const double mid = std::sqrt(lo * hi);
      DPC_ASSIGN_OR_RETURN(const double eps, cost(mid));
      (eps <= target.epsilon ? hi : lo) = mid;
    }
    const double s = hi;
    DPC_ASSIGN_OR_RETURN(const double charged, cost(s));
    const bool two_parts = relation == NeighbouringRelation::kReplaceOne;
    PreparedCase prepared;
    prepared.accounted_epsilon = charged;
    prepared.delta = target.delta;
    // The GDP mu the charge stands for: one part's sqrt 2 / sigma, or two
    // parts' 2 / sigma, sigma = s sqrt 2 the noise std.
    prepared.accounted_mu = (two_parts ? std::sqrt(2.0) : 1.0) / s;

    // The white-box distinguisher: the projection on the exact shift.
    const std::array<std::vector<Row>, 2> rows = Pair(relation);
    privacy::ZeroNoiseSource zero;
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd v0, Release(rows[0], s, &zero));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd v1, Release(rows[1], s, &zero));
    Eigen::VectorXd direction = v1 - v0;
    const double gap = direction.norm();
    if (!(gap > 0.0)) return absl::InternalError("audit pair has identical exact statistics");
    direction /= gap;
    prepared.run_and_score = [rows, s, v0, direction](
                                 int side, privacy::NoiseSource* noise) -> absl::StatusOr<double> {
      DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd out, Release(rows[side], s, noise));
      return direction.dot(out - v0);
    };
    return prepared;
  };
  return c;
}

AuditCase PartitionedMarginalsCase(NeighbouringRelation relation, const Mutation& mutation) {
  AuditCase c;
  c.kind = "partitioned_marginals";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kQuickRuns;
  c.full_runs = 400000;
  c.prepare = [relation, mutation](const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    data::Schema::Builder builder;
    builder.AddCategorical("a", {"a0", "a1"}).AddCategorical("y", {"0", "1", "2"}).SetLabel("y");
    DPC_ASSIGN_OR_RETURN(const data::Schema schema, builder.Build());
    std::array<data::Table, 2> tables = MarginalsPair(relation);
    auto pair = std::make_shared<const std::array<PlanDataset, 2>>(
        InMemoryPair(schema, std::move(tables[0]), std::move(tables[1]), relation,
                     target.delta));
    // The analyst's request: the 1-way marginal of a, partitioned by the
    // label (every declared value), at the target epsilon.
    v1::ReleaseRequest request;
    request.set_dataset_id((*pair)[0].dataset.id());
    request.set_idempotency_key("audit");
    request.set_epsilon(target.epsilon);
    request.mutable_marginals()->add_cliques()->add_columns(std::string("a"));
    request.mutable_partition()->set_column("y");
    DPC_ASSIGN_OR_RETURN(plan::ReleasePlan plan,
                         plan::PlanRelease(request, (*pair)[0].dataset, (*pair)[0].schema));
    if (!plan.marginals.has_value() || !plan.marginals->partitioned || !plan.event.has_value()) {
      return absl::InternalError("the plan is not a partitioned marginals release");
    }
    PrivacyEvent charged = *plan.event;
    // The plan's multiplier s is noise std / sensitivity for every part:
    // one part's mu, 1/s, is what the partitioned event stands for (one
    // part's cell under ADD_REMOVE; two parts' cells, each std s sqrt 2,
    // under REPLACE_ONE).
    double accounted_mu = 1.0 / plan.marginals->noise_multiplier;
    if (mutation.charge_one_part) {
      // The mutant: the plan's event replaced by its first part's add/remove
      // event (a row moving between parts charged as one part's neighbour).
      const auto* partitioned = std::get_if<privacy::PartitionedEvent>(&charged.variant());
      if (partitioned == nullptr || partitioned->add_remove.empty()) {
        return absl::InternalError("the partitioned plan's event is not partitioned");
      }
      charged = partitioned->add_remove.front();
      if (const auto* grid = std::get_if<privacy::GridGaussianEvent>(&charged.variant())) {
        accounted_mu = 1.0 / grid->noise_multiplier;
      }
    }
    PreparedCase prepared;
    DPC_RETURN_IF_ERROR(ChargePlanEvent(charged, relation, target.delta, &prepared));
    prepared.accounted_mu = accounted_mu;
    const double epsilon_alone = prepared.accounted_epsilon;
    auto marginals = std::make_shared<const plan::MarginalsReleasePlan>(*plan.marginals);
    auto run = [pair, marginals, epsilon_alone](
                   int side, privacy::NoiseSource* noise) -> absl::StatusOr<Eigen::VectorXd> {
      const PlanDataset& data = (*pair)[side];
      DPC_ASSIGN_OR_RETURN(const v1::Release released,
                           plan::ComputeMarginalsRelease(*marginals, data.dataset, data.schema,
                                                         data.table, "rel_audit", "audit",
                                                         epsilon_alone, noise));
      return ReleasedValues(released);
    };
    privacy::ZeroNoiseSource zero;
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd v0, run(0, &zero));
    DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd v1, run(1, &zero));
    if (v0.size() != v1.size()) return absl::InternalError("audit pair released different shapes");
    Eigen::VectorXd direction = v1 - v0;
    const double gap = direction.norm();
    if (!(gap > 0.0)) return absl::InternalError("audit pair has identical exact statistics");
    direction /= gap;
    prepared.run_and_score = [run, v0, direction](
                                 int side, privacy::NoiseSource* noise) -> absl::StatusOr<double> {
      DPC_ASSIGN_OR_RETURN(const Eigen::VectorXd out, run(side, noise));
      return direction.dot(out - v0);
    };
    return prepared;
  };
  return c;
}

std::vector<AuditCase> PartitionCases() {
  return {PartitionedCountsCase(NeighbouringRelation::kAddRemove),
          PartitionedCountsCase(NeighbouringRelation::kReplaceOne),
          PartitionedMarginalsCase(NeighbouringRelation::kAddRemove),
          PartitionedMarginalsCase(NeighbouringRelation::kReplaceOne)};
}

}  // namespace dpcurator::audit
