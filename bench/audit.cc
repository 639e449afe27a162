// The empirical privacy audit's long run (issue 23 items 1 and 3;
// docs/privacy.md section 7): every registered case at (eps, delta) for each
// delta asked, N runs per side on the production CSPRNG
// (SecureNoiseSource), printed as a table (kind, relation, accounted eps,
// delta, 95% eps lower bound, mu_emp, mu, N, seconds, verdict).
//
//   build/bench/audit [--quick] [--delta D] [--epsilon E] [--runs N]
//                     [--only KIND] [--mutants] [--json]
//
// --quick: each case's CI runs on fixed seeds (the quick audit's numbers);
// --delta: one delta instead of both 1e-5 and 1e-2; --epsilon: the target
// (default 1); --runs: runs per side instead of each case's full_runs;
// --only: cases whose kind contains KIND; --mutants: the planted bugs too
// (audit/mutants.h, linked here and in tests only); --json: one JSON
// array instead of the table. Exits 1 when an unmutated case's bound exceeds
// its accounted eps or a mutant is missed.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "audit/mutants.h"
#include "audit/registry.h"
#include "audit/runner.h"

namespace dpcurator {
namespace {

int Main(int argc, char** argv) {
  bool quick = false;
  bool json = false;
  bool mutants = false;
  std::vector<double> deltas = {1e-5, 1e-2};
  double epsilon = 1.0;
  int64_t runs = 0;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--mutants") == 0) {
      mutants = true;
    } else if (std::strcmp(argv[i], "--delta") == 0 && i + 1 < argc) {
      deltas = {std::atof(argv[++i])};
    } else if (std::strcmp(argv[i], "--epsilon") == 0 && i + 1 < argc) {
      epsilon = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::atoll(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: audit [--quick] [--delta D] [--epsilon E] [--runs N] [--only KIND] "
                   "[--mutants] [--json]\n");
      return 2;
    }
  }
  std::vector<audit::AuditCase> cases = audit::AllCases();
  if (mutants) {
    for (audit::AuditCase& c : audit::MutantCases()) cases.push_back(std::move(c));
  }
  std::vector<audit::AuditRow> rows;
  bool failed = false;
  for (const audit::AuditCase& c : cases) {
    if (!only.empty() && c.kind.find(only) == std::string::npos) continue;
    // A mutant is audited where it is known to show (mutants.h), a shipped
    // case at every delta asked.
    std::vector<audit::AuditTarget> targets;
    if (c.mutant) {
      targets = c.targets;
    } else {
      for (const double delta : deltas) targets.push_back({epsilon, delta});
    }
    for (const audit::AuditTarget& target : targets) {
      audit::AuditOptions options;
      options.secure_noise = !quick;
      options.runs_per_side = runs > 0 ? runs : (quick ? c.quick_runs : c.full_runs);
      const absl::StatusOr<audit::AuditRow> row = audit::RunAudit(c, target, options);
      if (!row.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", c.kind.c_str(), c.relation.c_str(),
                     std::string(row.status().message()).c_str());
        failed = true;
        continue;
      }
      if (row->mutant != row->violation()) failed = true;
      if (!json) {
        // One row at a time, so a long run shows progress.
        const std::string table = audit::FormatAuditTable({&*row, 1});
        std::fputs(rows.empty() ? table.c_str() : table.substr(table.find('\n') + 1).c_str(),
                   stdout);
        std::fflush(stdout);
      }
      rows.push_back(*row);
    }
  }
  if (json) std::fputs(audit::FormatAuditJson(rows).c_str(), stdout);
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace dpcurator

int main(int argc, char** argv) { return dpcurator::Main(argc, argv); }
