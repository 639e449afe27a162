// `dpcurator audit`: the empirical privacy audit, in process, for curators
// (issue 23 item 1; docs/privacy.md section 7). Runs the mechanisms' own
// code (core/release, the ledger's calibration, the noise layer) on
// worst-case neighbouring datasets and prints, per case, the rigorous 95%
// lower bound on epsilon beside the epsilon the ledger charges. Talks to no
// server and reads no private data.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/commands.h"
#include "audit/registry.h"
#include "audit/runner.h"

namespace dpcurator::client {
namespace {

constexpr char kAuditDescription[] =
    "Audits the privacy of the mechanisms this build ships, empirically, in this process (no "
    "server, no private data). For each case (a release kind or session step kind under a "
    "neighbouring relation) it builds two datasets D0 and D1 that differ in one canary row "
    "chosen to attain the sensitivity bound, runs the mechanism N times on each exactly as the "
    "server runs it (the same calibration of the noise at the requested epsilon and delta, the "
    "same sampling, engine and noise layer), and scores every output with a white-box "
    "distinguisher that knows everything but the noise. Session kinds (*_session) run whole "
    "sessions of T steps.\n\n"
    "Columns:\n"
    "  kind, relation  the mechanism and the neighbouring relation audited\n"
    "  eps, delta      what the ledger charges (the claim)\n"
    "  eps_lb95        a lower bound on the true epsilon that holds with 95% confidence "
    "(Clopper-Pearson intervals on a threshold test's error rates; the threshold is chosen on "
    "half the runs). eps_lb95 > eps means the claim is FALSE: a privacy bug. eps_lb95 below eps "
    "is expected: with N runs no test sees events rarer than about 1/N, and at small delta "
    "the claim lives in such events\n"
    "  mu_emp          the fitted Gaussian-DP mu of the scores (how far apart D0 and D1 look)\n"
    "  mu              the mu the accounting implies (one Gaussian: 1/s; sessions: the CLT mu "
    "q sqrt(T (e^{1/s^2} - 1)), Dong, Roth, Su 2019); mu_emp close to mu means the audit is "
    "tight and the engine adds the noise it claims\n"
    "  N               runs per dataset; seconds: wall time of the case\n\n"
    "Without --quick the noise is the production CSPRNG and each case runs its full N "
    "(minutes); --quick is CI's audit on fixed seeds (seconds). Exit status 1 when any "
    "case shows eps_lb95 > eps. docs/privacy.md section 7 explains the method.";

std::vector<OptionSpec> AuditOptions() {
  return {
      {"quick", "", "CI's quick audit: each case's quick N on fixed seeds", true},
      {"only", "", "audit only the cases whose kind contains this (e.g. rff_embedding, "
                   "dp_sgd_session)"},
      {"epsilon", "1", "the epsilon each case is calibrated for (the claim audited)"},
      {"delta", "", "the delta of the claim (default: both 1e-5 and 1e-2)"},
      {"runs", "", "runs per dataset instead of each case's own N"},
      {"json", "", "print one JSON array instead of the table", true},
  };
}

absl::Status RunAuditCommand(const ParsedArgs& args) {
  auto epsilon = args.GetDouble("epsilon");
  if (!epsilon.ok()) return epsilon.status();
  std::vector<double> deltas = {1e-5, 1e-2};
  if (args.Has("delta")) {
    auto delta = args.GetDouble("delta");
    if (!delta.ok()) return delta.status();
    deltas = {*delta};
  }
  int64_t runs = 0;
  if (args.Has("runs")) {
    auto value = args.GetInt("runs");
    if (!value.ok()) return value.status();
    runs = *value;
    if (runs < 8) return absl::InvalidArgumentError("--runs must be at least 8");
  }
  if (!(*epsilon > 0.0) || !std::isfinite(*epsilon)) {
    return absl::InvalidArgumentError("--epsilon must be positive and finite");
  }
  for (const double delta : deltas) {
    if (!(delta > 0.0 && delta < 1.0)) return absl::InvalidArgumentError("--delta must be in (0, 1)");
  }
  const bool quick = args.Flag("quick");
  const bool json = args.Flag("json");
  const std::string only = args.Has("only") ? args.Get("only") : "";
  std::vector<audit::AuditCase> cases;
  std::vector<std::string> kinds;
  for (audit::AuditCase& c : audit::AllCases()) {
    if (kinds.empty() || kinds.back() != c.kind) kinds.push_back(c.kind);
    if (!only.empty() && c.kind.find(only) == std::string::npos) continue;
    cases.push_back(std::move(c));
  }
  if (cases.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--only '", only,
                                                   "' matches no audited kind; the kinds are ",
                                                   absl::StrJoin(kinds, ", ")));
  }
  std::vector<audit::AuditRow> rows;
  bool violation = false;
  for (const audit::AuditCase& c : cases) {
    for (const double delta : deltas) {
      audit::AuditOptions options;
      options.secure_noise = !quick;
      options.runs_per_side = runs > 0 ? runs : (quick ? c.quick_runs : c.full_runs);
      absl::StatusOr<audit::AuditRow> row = audit::RunAudit(c, {*epsilon, delta}, options);
      if (!row.ok()) {
        return absl::Status(row.status().code(), absl::StrCat(c.kind, " ", c.relation, ": ",
                                                              row.status().message()));
      }
      violation = violation || row->violation();
      if (!json) {
        // One row at a time, so a long run shows progress.
        const std::string table = audit::FormatAuditTable({&*row, 1});
        std::fputs(rows.empty() ? table.c_str() : table.substr(table.find('\n') + 1).c_str(),
                   stdout);
        std::fflush(stdout);
      }
      rows.push_back(*std::move(row));
    }
  }
  if (json) std::fputs(audit::FormatAuditJson(rows).c_str(), stdout);
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
           kAuditDescription, AuditOptions(), RunAuditCommand}};
}

}  // namespace dpcurator::client
