#ifndef DPCURATOR_AUDIT_REGISTRY_H_
#define DPCURATOR_AUDIT_REGISTRY_H_

// Every audit case the project ships (CI's quick audit, bench/audit,
// `dpcurator audit`): the one-shot kinds (one_shot_cases.h) and the session
// kinds. Planted mutants are not here (mutants.h, tests and bench only).

#include <vector>

#include "audit/audit_case.h"

namespace dpcurator::audit {

std::vector<AuditCase> AllCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_REGISTRY_H_
