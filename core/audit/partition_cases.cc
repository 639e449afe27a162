#include "core/audit/partition_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/privacy/accounting.h"
#include "core/privacy/discrete_noise.h"
#include "core/privacy/events.h"
#include "core/util/status_macros.h"

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
absl::StatusOr<PrivacyEvent> Charge(NeighbouringRelation relation, double s,
                                    bool charge_one_part) {
  DPC_ASSIGN_OR_RETURN(const PrivacyEvent part, PrivacyEvent::DiscreteGaussian(s));
  if (charge_one_part) return part;
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

}  // namespace

AuditCase PartitionedCountsCase(NeighbouringRelation relation, bool charge_one_part) {
  AuditCase c;
  c.kind = "partitioned_counts";
  c.relation = privacy::RelationName(relation);
  c.tightness = Tightness::kGaussianMu;
  c.quick_runs = kQuickRuns;
  c.full_runs = 400000;
  c.prepare = [relation, charge_one_part](
                  const AuditTarget& target) -> absl::StatusOr<PreparedCase> {
    // The noise multiplier the ledger's own charge calls for: the smallest
    // s (to a relative 1e-9) whose charged event costs at most the target,
    // by bisection on the accountant itself, so that a wrong partitioned
    // curve (too small a charge) means too little noise and is caught here,
    // not hidden by a calibration that assumed the right curve. Expected:
    // ADD_REMOVE one part's s1; REPLACE_ONE s1 sqrt 2 (two parts); the
    // one-part mutant s1 in both.
    auto cost = [&](double s) -> absl::StatusOr<double> {
      DPC_ASSIGN_OR_RETURN(const PrivacyEvent event, Charge(relation, s, charge_one_part));
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
    const bool two_parts = relation == NeighbouringRelation::kReplaceOne && !charge_one_part;
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

std::vector<AuditCase> PartitionCases() {
  return {PartitionedCountsCase(NeighbouringRelation::kAddRemove),
          PartitionedCountsCase(NeighbouringRelation::kReplaceOne)};
}

}  // namespace dpcurator::audit
