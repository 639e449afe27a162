#include "audit/registry.h"

#include "audit/aim_cases.h"
#include "audit/one_shot_cases.h"
#include "audit/partition_cases.h"
#include "audit/session_cases.h"

namespace dpcurator::audit {

std::vector<AuditCase> AllCases() {
  std::vector<AuditCase> cases = OneShotCases();
  // Session kinds register here, one line each: SessionCases() holds the
  // three step kinds under both relations and the partitioned sessions
  // ("kernel_witness_partitioned_session", ADD_REMOVE).
  for (AuditCase& c : SessionCases()) cases.push_back(std::move(c));
  for (AuditCase& c : PartitionCases()) cases.push_back(std::move(c));
  // Recipe kinds: aim (issue 26) and aim(label), its label round (issue 38).
  for (AuditCase& c : AimCases()) cases.push_back(std::move(c));
  return cases;
}

}  // namespace dpcurator::audit
