#ifndef DPCURATOR_AUDIT_RUNNER_H_
#define DPCURATOR_AUDIT_RUNNER_H_

// The audit harness (issue 23 item 1): runs a case N times on D0 and N
// times on D1 and turns the two score samples into one table row.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "audit/audit_case.h"
#include "audit/statistics.h"

namespace dpcurator::audit {

struct AuditOptions {
  int64_t runs_per_side = 0;  // 0: the case's quick_runs
  // Fixed seeds (CI): SeededNoiseSource(h) for D0 and (h + 1) for D1, h a
  // hash of this seed and the case's kind and relation.
  uint64_t seed = 20231;
  // SecureNoiseSource, the production CSPRNG (bench/audit), instead.
  bool secure_noise = false;
  double alpha = 0.05;  // the bound holds with confidence 1 - alpha
};

struct AuditRow {
  std::string kind;
  std::string relation;
  bool mutant = false;
  Tightness tightness = Tightness::kNone;
  double accounted_epsilon = 0.0;
  double delta = 0.0;
  EpsilonLowerBound bound;  // bound.epsilon: the 95% lower bound
  double mu_emp = 0.0;      // FittedGaussianDpMu of the scores
  double accounted_mu = 0.0;  // 1/s of the charged Gaussian; 0 if none
  double target_mu = 0.0;     // GaussianDpMuFor(accounted eps, delta)
  int64_t runs_per_side = 0;
  double seconds = 0.0;

  // The lower bound exceeds the charge: a privacy bug (or, for a mutant,
  // the planted one found).
  bool violation() const { return bound.epsilon > accounted_epsilon; }
  // The case's tightness demand (audit_case.h Tightness) is met.
  bool tight() const;
};

absl::StatusOr<AuditRow> RunAudit(const AuditCase& audit_case, const AuditTarget& target,
                                  const AuditOptions& options = {});

// An aligned table for people (kind, relation, eps, delta, eps_lb, mu_emp,
// mu, N, seconds, verdict) and one JSON array for machines.
std::string FormatAuditTable(absl::Span<const AuditRow> rows);
std::string FormatAuditJson(absl::Span<const AuditRow> rows);

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_RUNNER_H_
