#ifndef DPCURATOR_AUDIT_AIM_CASES_H_
#define DPCURATOR_AUDIT_AIM_CASES_H_

// The aim recipe's audit case (issue 26 item 4; docs/privacy.md 2.12 and
// 7.1): train::RunAim as the server runs it (the plan's calibration, the
// candidates, the estimator behind AimModel, the grid Gaussian and the
// exact exponential mechanism), on a tiny worst-case pair, charged as the
// ledger charges it: one zcdp(rho) event.

#include <vector>

#include "audit/audit_case.h"
#include "core/privacy/relation.h"

namespace dpcurator::audit {

// Two categorical columns (3 and 2 levels), T = 2 planned rounds (the 1-way
// release and one last round). D0: rows (a, u), (b, u), (a, u); D1 adds the
// canary (c, v) (ADD_REMOVE) or puts it in place of the first row
// (REPLACE_ONE). The canary is alone in its cell of every table, so the
// white-box statistic is the inverse-variance weighted sum, over every
// released table, of the noisy count of the canary's cell (less that of the
// replaced row's cell under REPLACE_ONE): the Gaussian likelihood ratio of
// the measurements, ignoring the selection. A lower bound, so no tightness
// is demanded: the selection's share of rho is not probed.
AuditCase AimCase(privacy::NeighbouringRelation relation);

std::vector<AuditCase> AimCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_AIM_CASES_H_
