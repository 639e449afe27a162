#include "audit/mutants.h"

#include <string>
#include <utility>

#include "audit/one_shot_cases.h"
#include "audit/partition_cases.h"

namespace dpcurator::audit {
namespace {

AuditCase AsMutant(AuditCase c, std::string name, int64_t runs) {
  c.kind = "mutant:" + std::move(name) + "/" + c.kind;
  c.mutant = true;
  c.tightness = Tightness::kNone;
  c.quick_runs = runs;
  c.full_runs = 5 * runs;
  // Where a mutant's excess is easiest to show with few runs (docs/privacy.md
  // 7.3): the accounted mu of (1, 1e-2) is 0.53, and a violation by a
  // factor r in mu is a large gap in eps there.
  c.targets = {{1.0, 1e-2}};
  return c;
}

}  // namespace

std::vector<AuditCase> MutantCases() {
  using privacy::NeighbouringRelation;
  std::vector<AuditCase> cases;
  cases.push_back(AsMutant(RffEmbeddingCase(NeighbouringRelation::kAddRemove, false,
                                            Mutation{.noise_multiplier_factor = 0.5}),
                           "sigma_halved", 40000));
  cases.push_back(AsMutant(RffEmbeddingCase(NeighbouringRelation::kAddRemove, false,
                                            Mutation{.feature_norm = 2.0}),
                           "norm_clamp_removed", 40000));
  cases.push_back(AsMutant(RffEmbeddingCase(NeighbouringRelation::kReplaceOne, false,
                                            Mutation{.run_as_add_remove = true}),
                           "replace_one_as_add_remove", 40000));
  cases.push_back(AsMutant(ExponentialMechanismCase(NeighbouringRelation::kAddRemove,
                                                    Mutation{.sensitivity_factor = 0.5}),
                           "em_sensitivity_halved", 40000));
  cases.push_back(AsMutant(LdpLaplaceCase(Mutation{.ldp_record_scale = 2.0}),
                           "ldp_radius_not_enforced", 20000));
  // A row that changes parts under REPLACE_ONE, charged as one part only.
  cases.push_back(AsMutant(PartitionedMarginalsCase(NeighbouringRelation::kReplaceOne,
                                                    Mutation{.charge_one_part = true}),
                           "partition_charged_one_part", 40000));
  return cases;
}

}  // namespace dpcurator::audit
