#ifndef DPCURATOR_AUDIT_PARTITION_CASES_H_
#define DPCURATOR_AUDIT_PARTITION_CASES_H_

// The audit of parallel composition over a public partition (issue 27 item
// 1; docs/privacy.md 3.7 and 7.1).
//
// The partitioned marginals release as the server runs it (issue 37 items
// 1-2): a marginals request with ReleaseRequest.partition, planned by
// plan::PlanRelease (PlanMarginalsRelease) on an in-memory dataset
// (audit/plan_fixture.h), plan.event charged, and per run
// plan::ComputeMarginalsRelease (release::RunMarginalsParts). Rows (a, y),
// a in {a0, a1}, y the label with declared values {0, 1, 2}; each part
// releases the 1-way table of a over its rows. Canary: ADD_REMOVE adds
// (a1, y = 1); REPLACE_ONE replaces (a1, y = 0) by (a1, y = 1), a row that
// changes parts (one cell of part 0 and one of part 1 move by 1).
//
// Primitive (no server plan builds it): the accountant's partitioned curve
// on a release whose sensitivity inside a part (1) is below its
// add/remove sensitivity (sqrt 2), the case where the REPLACE_ONE curve's
// two-part term alone binds (a marginals part has the same sensitivity
// either way, so its two terms coincide). Rows (x, y) with x in [0, 1]
// (declared bounds, clamped) and y a public label with declared values
// {0, 1, 2}; part k releases [sum of x; count] over the rows with y = k
// with the grid's discrete Gaussian (core/privacy/discrete_noise.h), each
// part with its own noise. The charge is built by hand:
//   PartitionedAddRemove(DiscreteGaussian(s) x 3)                (ADD_REMOVE)
//   PartitionedReplaceOne(DiscreteGaussian(s) x 3,
//                         DiscreteGaussian(s sqrt 2) x 3)        (REPLACE_ONE)
// with s found by bisection on the accountant itself, so a wrong curve
// means too little noise, and is caught. The canary: under ADD_REMOVE, D1
// adds (1, y = 1); under REPLACE_ONE, D1 replaces D0's row (1, y = 0) by
// (1, y = 1), so the row changes parts and parts 0 and 1 both move by
// sqrt 2. The distinguisher projects the whole output on the exact shift,
// as the one-shot cases do.

#include <vector>

#include "audit/audit_case.h"
#include "audit/one_shot_cases.h"
#include "core/privacy/relation.h"

namespace dpcurator::audit {

// The partitioned marginals release through the server's plan.
// mutation.charge_one_part: the planted bug of mutants.h, the plan's
// partitioned event replaced by one part's add/remove event. Tests and
// bench only.
AuditCase PartitionedMarginalsCase(privacy::NeighbouringRelation relation,
                                   const Mutation& mutation = {});

// Primitive: the partitioned [sum; count] release and its hand-built
// charge (above).
AuditCase PartitionedCountsCase(privacy::NeighbouringRelation relation);

// The cases above under each relation, unmutated (registry.cc).
std::vector<AuditCase> PartitionCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_PARTITION_CASES_H_
