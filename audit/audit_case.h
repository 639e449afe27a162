#ifndef DPCURATOR_AUDIT_AUDIT_CASE_H_
#define DPCURATOR_AUDIT_AUDIT_CASE_H_

// One case of the empirical audit (issue 23 item 1; docs/privacy.md section
// 7): a mechanism as the server runs it, a worst-case pair of neighbouring
// inputs D0, D1, and a white-box distinguisher. A case is one small unit:
// a name, the relation it audits, and a Prepare function that, for a
// requested (epsilon, delta), calibrates the mechanism the way the server
// does, builds D0 and D1, and returns
//   * what the ledger charges (accounted epsilon at delta, and the GDP mu
//     the accounting implies where the mechanism is one Gaussian), and
//   * RunAndScore(side, noise): one run of the mechanism on D_side with the
//     given noise source, scored by the distinguisher (larger = "D1").
// The harness (runner.h) repeats RunAndScore N times per side and turns the
// two samples into the bound of statistics.h. Session cases (auditB) are
// the same struct: RunAndScore runs a whole session of T steps.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/privacy/noise_source.h"

namespace dpcurator::audit {

// The (epsilon, delta) a case is calibrated for, as a curator would request.
struct AuditTarget {
  double epsilon = 1.0;
  double delta = 1e-5;
};

// What the quick audit in CI demands of a case beyond "no violation"
// (issue 23 "Done when"): one-shot Gaussian kinds mu_emp >= 0.9 mu; pure
// epsilon mechanisms (Laplace, exponential mechanism) eps_emp >= 0.7 eps.
enum class Tightness { kNone, kGaussianMu, kEpsilon };

// A case prepared for one target: the charge, and the game.
struct PreparedCase {
  double accounted_epsilon = 0.0;  // what the ledger charges at `delta`
  double delta = 0.0;
  // 1/s for one Gaussian of multiplier s (or sqrt(sum 1/s_i^2)); 0 when the
  // mechanism is not a Gaussian.
  double accounted_mu = 0.0;
  // One run on D0 (side 0) or D1 (side 1), scored. Must be a pure function
  // of (side, the noise source's draws).
  std::function<absl::StatusOr<double>(int side, privacy::NoiseSource* noise)> run_and_score;
};

struct AuditCase {
  std::string kind;      // "rff_embedding", "ldp_laplace_l1", ...; mutants: "mutant:..."
  std::string relation;  // "ADD_REMOVE", "REPLACE_ONE", or "LOCAL" (LDP)
  Tightness tightness = Tightness::kNone;
  // A planted bug (test and bench code only): the audit must find
  // eps_lower > accounted epsilon.
  bool mutant = false;
  // Runs per side in the CI quick audit (fixed seeds) and in bench/audit.
  int64_t quick_runs = 10000;
  int64_t full_runs = 100000;
  // Where this case is audited when no target is given: the quick audit
  // runs each case at each of these.
  std::vector<AuditTarget> targets = {{1.0, 1e-5}, {1.0, 1e-2}};
  std::function<absl::StatusOr<PreparedCase>(const AuditTarget& target)> prepare;
};

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_AUDIT_CASE_H_
