#ifndef DPCURATOR_AUDIT_MUTANTS_H_
#define DPCURATOR_AUDIT_MUTANTS_H_

// Planted privacy bugs (issue 23 item 2), for the audit's power tests and
// bench/audit only: library dpc_audit_mutants, which no shipped binary
// links. Each is a case with a Mutation (one_shot_cases.h), audited at
// (eps, delta) = (1, 1e-2), where its lower bound must exceed the epsilon
// charged. The plan cases' mutants edit the server's plan after the plan
// function returns and keep the event it computed (issue 37 item 2): a
// plan whose mechanism and charge disagree.

#include <vector>

#include "audit/audit_case.h"

namespace dpcurator::audit {

// sigma halved (the rff plan's multiplier halved, ADD_REMOVE); the
// feature-norm clamp removed (the rff plan's noise step over features of
// norm 2, ADD_REMOVE); replace-one run as add/remove (the REPLACE_ONE rff
// plan charged, the engine run on the dataset's relation flipped); the
// exponential mechanism's sensitivity halved (primitive, ADD_REMOVE); the
// LDP radius not enforced (primitive, Laplace, records at 2R); a
// partitioned marginals plan charged as one part (REPLACE_ONE, a row
// changing parts).
std::vector<AuditCase> MutantCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_MUTANTS_H_
