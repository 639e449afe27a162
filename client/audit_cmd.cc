// `dpcurator audit`: the empirical privacy audit, in process, for curators
// (issue 23 item 1; docs/privacy.md section 7). Runs the mechanisms' own
// code (core/release, the ledger's calibration, the noise layer) on
// worst-case neighbouring datasets and prints, per case, the rigorous 95%
// lower bound on epsilon beside the epsilon the ledger charges. Talks to no
// server and reads no private data.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "core/audit/session_cases.h"

namespace dpcurator::client {
namespace {

constexpr char kAuditDescription[] =
    "Audits the privacy of the mechanisms this build ships, empirically, in this process (no "
    "server, no private data). For each case (a release or session step kind under a "
    "neighbouring relation) it builds two datasets D0 and D1 that differ in one canary row "
    "chosen to attain the sensitivity bound, runs the mechanism N times on each exactly as the "
    "server runs it (the same calibration of the noise at the requested epsilon and delta, the "
    "same sampling, the same engine and noise layer), and scores every output with a white-box "
    "distinguisher that knows everything but the noise.\n\n"
    "Columns:\n"
    "  kind, relation  the mechanism and the neighbouring relation audited\n"
    "  eps             the epsilon the ledger charges (the claim), at --delta\n"
    "  eps_lb95        a lower bound on the true epsilon that holds with 95% confidence "
    "(Clopper-Pearson intervals on a threshold test's error rates; the threshold is chosen on "
    "half the runs). eps_lb95 > eps means the claim is FALSE: a privacy bug. eps_lb95 far below "
    "eps is expected with few runs and small delta (the claim lives in rare events)\n"
    "  mu_emp          the fitted Gaussian-DP mu of the scores (how far apart D0 and D1 look)\n"
    "  mu              the mu the accounting implies (sessions: the CLT mu q sqrt(T (e^{1/s^2} "
    "- 1)), Dong, Roth, Su 2019); mu_emp close to mu means the audit is tight\n"
    "  N               runs per dataset; seconds: wall time of the case\n\n"
    "Exit status 1 when any case shows eps_lb95 > eps.";

std::vector<OptionSpec> AuditOptions() {
  return {
      {"quick", "", "fewer runs (CI size: 2000 sessions per dataset instead of 20000)", true},
      {"only", "", "audit only this kind (e.g. dp_sgd_session, kernel_witness_session, "
                   "rff_embedding_session)"},
      {"epsilon", "4", "the epsilon each case is calibrated for (the claim audited)"},
      {"delta", "1e-5", "the delta of the claim"},
      {"seed", "23001", "seed of the audit's reproducible noise"},
      {"json", "", "print JSON (one object per case)", true},
  };
}

absl::Status RunAudit(const ParsedArgs& args) {
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return epsilon.status();
  auto delta = args.GetDouble("delta");
  if (!delta.ok()) return delta.status();
  auto seed = args.GetInt("seed");
  if (!seed.ok()) return seed.status();
  if (!(*epsilon > 0.0) || !(*delta > 0.0 && *delta < 1.0)) {
    return absl::InvalidArgumentError("--epsilon must be positive and --delta in (0, 1)");
  }
  // TODO(lead): add auditA's one-shot cases (core/audit/registry.h AllCases()
  // through RunAudit) beside the session cases once the registry is merged.
  std::vector<audit::SessionAuditConfig> cases;
  std::vector<std::string> kinds;
  for (audit::SessionAuditConfig config : audit::SessionAuditCases(args.Flag("quick"))) {
    const std::string kind(audit::SessionStepKindName(config.kind));
    if (kinds.empty() || kinds.back() != kind) kinds.push_back(kind);
    if (args.Has("only") && args.Get("only") != kind) continue;
    config.epsilon = *epsilon;
    config.delta = *delta;
    config.seed += static_cast<uint64_t>(*seed) - 23001;
    cases.push_back(config);
  }
  if (cases.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--only '", args.Get("only"), "' names no audited kind; choose one of ",
        absl::StrJoin(kinds, ", ")));
  }
  const bool json = args.Flag("json");
  if (!json) {
    std::printf("%-24s %-12s %7s %9s %7s %7s %7s %8s\n", "kind", "relation", "eps", "eps_lb95",
                "mu_emp", "mu", "N", "seconds");
  }
  nlohmann::json out = nlohmann::json::array();
  bool violation = false;
  for (const audit::SessionAuditConfig& config : cases) {
    auto row = audit::RunSessionAudit(config);
    if (!row.ok()) return row.status();
    violation = violation || row->bound.epsilon > row->accounted_epsilon;
    if (json) {
      out.push_back({{"kind", row->kind},
                     {"relation", row->relation},
                     {"accounted_epsilon", row->accounted_epsilon},
                     {"delta", row->delta},
                     {"epsilon_lower_bound_95", row->bound.epsilon},
                     {"mu_emp", row->mu_emp},
                     {"mu", row->mu_clt},
                     {"noise_multiplier", row->noise_multiplier},
                     {"sampling_rate", row->sampling_rate},
                     {"steps", row->steps},
                     {"runs_per_dataset", row->sessions},
                     {"seconds", row->seconds},
                     {"violation", row->bound.epsilon > row->accounted_epsilon}});
    } else {
      std::printf("%-24s %-12s %7.3f %9.3f %7.3f %7.3f %7lld %8.2f%s\n", row->kind.c_str(),
                  row->relation.c_str(), row->accounted_epsilon, row->bound.epsilon,
                  row->mu_emp, row->mu_clt, static_cast<long long>(row->sessions), row->seconds,
                  row->bound.epsilon > row->accounted_epsilon ? "  VIOLATION" : "");
      std::fflush(stdout);
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  if (violation) {
    if (!json) {
      std::printf("\nA lower bound exceeds the charged epsilon: the claim is false. Report it "
                  "as a privacy bug with this output.\n");
    }
    return QuietExit(1);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Command> AuditCommands() {
  return {{"audit", "empirical privacy audit of the shipped mechanisms (in process)",
           kAuditDescription, AuditOptions(), RunAudit}};
}

}  // namespace dpcurator::client
