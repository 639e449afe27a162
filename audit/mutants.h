#ifndef DPCURATOR_AUDIT_MUTANTS_H_
#define DPCURATOR_AUDIT_MUTANTS_H_

// Planted privacy bugs (issue 23 item 2), for the audit's power tests and
// bench/audit only: library dpc_audit_mutants, which no shipped binary
// links. Each is a one-shot case with a Mutation (one_shot_cases.h), audited
// at (eps, delta) = (1, 1e-2), where its lower bound must exceed eps.

#include <vector>

#include "audit/audit_case.h"

namespace dpcurator::audit {

// sigma halved (rff, ADD_REMOVE); the feature-norm clamp removed (rff,
// features of norm 2, ADD_REMOVE); replace-one charged as add/remove (rff,
// REPLACE_ONE pair); the exponential mechanism's sensitivity halved
// (ADD_REMOVE); the LDP radius not enforced (Laplace, records at 2R); a
// partitioned release charged as one part (REPLACE_ONE, a row changing parts).
std::vector<AuditCase> MutantCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_MUTANTS_H_
