#include "audit/runner.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/privacy/noise_source.h"
#include "core/util/status_macros.h"

namespace dpcurator::audit {
namespace {

// Issue 23 "Done when": one-shot Gaussian kinds mu_emp >= 0.9 mu; Laplace
// and the exponential mechanism eps_emp >= 0.7 eps.
inline constexpr double kGaussianMuTightness = 0.9;
inline constexpr double kEpsilonTightness = 0.7;

absl::StatusOr<std::unique_ptr<privacy::NoiseSource>> MakeSource(const AuditOptions& options,
                                                                 uint64_t seed) {
  if (options.secure_noise) {
    DPC_ASSIGN_OR_RETURN(std::unique_ptr<privacy::SecureNoiseSource> secure,
                         privacy::SecureNoiseSource::Create());
    return std::unique_ptr<privacy::NoiseSource>(std::move(secure));
  }
  return std::unique_ptr<privacy::NoiseSource>(std::make_unique<privacy::SeededNoiseSource>(seed));
}

// FNV-1a of the case's name: each case draws its own fixed noise stream,
// so two kinds whose releases happen to have the same shape do not share
// their draws.
uint64_t CaseSeed(const AuditCase& audit_case, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (const char ch : audit_case.kind + "/" + audit_case.relation) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ULL;
  }
  return h;
}

const char* Verdict(const AuditRow& row) {
  if (row.mutant) return row.violation() ? "caught" : "MISSED";
  if (row.violation()) return "VIOLATION";
  return row.tight() ? "ok" : "loose";
}

}  // namespace

bool AuditRow::tight() const {
  switch (tightness) {
    case Tightness::kGaussianMu:
      return mu_emp >= kGaussianMuTightness * accounted_mu;
    case Tightness::kEpsilon:
      return bound.epsilon >= kEpsilonTightness * accounted_epsilon;
    case Tightness::kNone:
      return true;
  }
  return true;
}

absl::StatusOr<AuditRow> RunAudit(const AuditCase& audit_case, const AuditTarget& target,
                                  const AuditOptions& options) {
  if (!audit_case.prepare) return absl::InvalidArgumentError("audit case has no prepare");
  const auto start = std::chrono::steady_clock::now();
  DPC_ASSIGN_OR_RETURN(const PreparedCase prepared, audit_case.prepare(target));
  const int64_t runs = options.runs_per_side > 0 ? options.runs_per_side : audit_case.quick_runs;
  const uint64_t seed = CaseSeed(audit_case, options.seed);
  DPC_ASSIGN_OR_RETURN(auto noise0, MakeSource(options, seed));
  DPC_ASSIGN_OR_RETURN(auto noise1, MakeSource(options, seed + 1));
  std::vector<double> scores0;
  std::vector<double> scores1;
  scores0.reserve(runs);
  scores1.reserve(runs);
  for (int64_t i = 0; i < runs; ++i) {
    DPC_ASSIGN_OR_RETURN(const double s0, prepared.run_and_score(0, noise0.get()));
    DPC_ASSIGN_OR_RETURN(const double s1, prepared.run_and_score(1, noise1.get()));
    scores0.push_back(s0);
    scores1.push_back(s1);
  }
  AuditRow row;
  row.kind = audit_case.kind;
  row.relation = audit_case.relation;
  row.mutant = audit_case.mutant;
  row.tightness = audit_case.tightness;
  row.accounted_epsilon = prepared.accounted_epsilon;
  row.delta = prepared.delta;
  row.accounted_mu = prepared.accounted_mu;
  row.runs_per_side = runs;
  DPC_ASSIGN_OR_RETURN(row.bound,
                       EmpiricalEpsilonLowerBound(scores0, scores1, prepared.delta, options.alpha));
  // A score that never varies (an indicator never hit) has no fitted mu.
  const absl::StatusOr<double> mu_emp = FittedGaussianDpMu(scores0, scores1);
  row.mu_emp = mu_emp.ok() ? *mu_emp : 0.0;
  DPC_ASSIGN_OR_RETURN(row.target_mu, GaussianDpMuFor(prepared.accounted_epsilon, prepared.delta));
  row.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return row;
}

std::string FormatAuditTable(absl::Span<const AuditRow> rows) {
  std::string out = absl::StrFormat("%-50s %-11s %7s %8s %8s %7s %7s %7s %8s %8s  %s\n", "kind",
                                    "relation", "eps", "delta", "eps_lb95", "mu_emp", "mu",
                                    "mu(e,d)", "N", "seconds", "verdict");
  for (const AuditRow& row : rows) {
    const std::string mu =
        row.accounted_mu > 0.0 ? absl::StrFormat("%.4f", row.accounted_mu) : std::string("-");
    absl::StrAppendFormat(&out, "%-50s %-11s %7.4f %8.0e %8.4f %7.4f %7s %7.4f %8d %8.2f  %s\n",
                          row.kind, row.relation, row.accounted_epsilon, row.delta,
                          row.bound.epsilon, row.mu_emp, mu, row.target_mu, row.runs_per_side,
                          row.seconds, Verdict(row));
  }
  return out;
}

std::string FormatAuditJson(absl::Span<const AuditRow> rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const AuditRow& row = rows[i];
    absl::StrAppendFormat(
        &out,
        "%s\n  {\"kind\": \"%s\", \"relation\": \"%s\", \"mutant\": %s, \"epsilon\": %.17g, "
        "\"delta\": %.17g, \"epsilon_lower_95\": %.17g, \"threshold\": %.17g, "
        "\"fpr_upper\": %.17g, \"fnr_upper\": %.17g, \"mu_emp\": %.17g, \"mu\": %.17g, "
        "\"mu_for_epsilon_delta\": %.17g, \"runs_per_side\": %d, \"seconds\": %.6f, "
        "\"verdict\": \"%s\"}",
        i == 0 ? "" : ",", row.kind, row.relation, row.mutant ? "true" : "false",
        row.accounted_epsilon, row.delta, row.bound.epsilon, row.bound.threshold,
        row.bound.fpr_upper, row.bound.fnr_upper, row.mu_emp, row.accounted_mu, row.target_mu,
        row.runs_per_side, row.seconds, Verdict(row));
  }
  out += "\n]\n";
  return out;
}

}  // namespace dpcurator::audit
