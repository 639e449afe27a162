#ifndef DPCURATOR_AUDIT_PARTITION_CASES_H_
#define DPCURATOR_AUDIT_PARTITION_CASES_H_

// The audit of parallel composition over a public partition (issue 27 item
// 1; docs/privacy.md 3.7 and 7.1). The mechanism: rows (x, y) with x in
// [0, 1] (declared bounds, clamped) and y a public label with declared
// values {0, 1, 2}; part k releases [sum of x; count] over the rows with
// y = k with the grid's discrete Gaussian (core/privacy/discrete_noise.h),
// each part with its own noise. That vector has L2 sensitivity sqrt 2 to a
// row added to or removed from the part, and 1 to a row replaced inside
// it, so the ledger charges
//   PartitionedAddRemove(DiscreteGaussian(s) x 3)                (ADD_REMOVE)
//   PartitionedReplaceOne(DiscreteGaussian(s) x 3,
//                         DiscreteGaussian(s sqrt 2) x 3)        (REPLACE_ONE)
// with s calibrated against that charge (bisection on the accountant
// itself, so a wrong curve means too little noise, and is caught). The canary: under ADD_REMOVE, D1 adds (1, y = 1);
// under REPLACE_ONE, D1 replaces D0's row (1, y = 0) by (1, y = 1), so the
// row changes parts and parts 0 and 1 both move by sqrt 2 (the case the
// replace-one curve's two-part term is for). The distinguisher projects the
// whole output on the exact shift, as the one-shot cases do.

#include <vector>

#include "audit/audit_case.h"
#include "core/privacy/relation.h"

namespace dpcurator::audit {

// `charge_one_part`: the planted bug of mutants.h, the ledger charging one
// part's add/remove event instead of the partitioned event (and the noise
// calibrated to that charge). Tests and bench only.
AuditCase PartitionedCountsCase(privacy::NeighbouringRelation relation,
                                bool charge_one_part = false);

// The partitioned marginals release as the server runs it (issue 27 item
// 4; core/release/partitioned_marginals.h): rows (a, y), a in {a0, a1}, y
// the label with declared values {0, 1, 2}; each part releases the 1-way
// table of a over its rows (release::RunMarginalsParts), charged as
// release::MarginalsEvent and calibrated by the server's own
// CalibrateEventNoiseMultiplier. Canary as above: ADD_REMOVE adds (a1,
// y = 1); REPLACE_ONE replaces (a1, y = 0) by (a1, y = 1), a row that
// changes parts (one cell of part 0 and one of part 1 move by 1).
AuditCase PartitionedMarginalsCase(privacy::NeighbouringRelation relation);

// The cases above under each relation, unmutated (registry.cc).
std::vector<AuditCase> PartitionCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_PARTITION_CASES_H_
