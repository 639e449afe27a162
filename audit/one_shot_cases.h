#ifndef DPCURATOR_AUDIT_ONE_SHOT_CASES_H_
#define DPCURATOR_AUDIT_ONE_SHOT_CASES_H_

// The one-shot release kinds' audit cases (issue 23 item 1): rff and charfn
// embeddings, an image-schema rff release, the marginals MST measures, the
// exponential mechanism MST selects with, and the two local-DP device
// mechanisms, each under every relation it is defined for. Each case runs
// the kind's own Resolve, the server's calibration of s at the requested
// (eps, delta) (CalibrateGridGaussianNoiseMultiplier, as
// server/releases.cc PlanRelease), and the kind's Run with the noise source
// it is handed, on a tiny worst-case pair (docs/privacy.md 7.1).

#include <vector>

#include "audit/audit_case.h"
#include "core/privacy/relation.h"

namespace dpcurator::audit {

// A planted bug, for the audit's power tests only (audit/mutants.h;
// never reachable from a shipped binary's flags). The default is the
// shipped code exactly.
struct Mutation {
  // Run with s * factor while charging s (1/2: "sigma halved").
  double noise_multiplier_factor = 1.0;
  // Scale every feature vector to this norm, as if the norm clamp were
  // missing (2: the canary's contribution, and so the sensitivity, doubles).
  double feature_norm = 1.0;
  // REPLACE_ONE pair, mechanism run and charged as ADD_REMOVE.
  bool run_as_add_remove = false;
  // Exponential mechanism: the declared sensitivity times this.
  double sensitivity_factor = 1.0;
  // LDP: the records sit at this multiple of the radius and are not
  // projected ("radius not enforced").
  double ldp_record_scale = 1.0;
};

// RFF embedding (release::RffEmbeddingKind) on a numeric schema, or on a
// 2 x 2 image schema when `image`.
AuditCase RffEmbeddingCase(privacy::NeighbouringRelation relation, bool image,
                           const Mutation& mutation = {});
// Characteristic-function embedding with a declared length-scale.
AuditCase CharfnEmbeddingCase(privacy::NeighbouringRelation relation,
                              const Mutation& mutation = {});
// The external path (issue 28; docs/scale-out.md "External datasets"): the
// exact statistic of each side computed as the curator's partials compute
// it (release::ExactLabelledEmbedding, in the partials' layout), carried as
// the submitted vector (release::ExactEmbeddingFromVector), and noised by
// the kind's ReleaseExact, the step RunnerService.SubmitStatistic runs
// (PreparedEngine::RunOnStatistic). rff_embedding, or charfn_embedding with
// a declared length-scale when `charfn`.
AuditCase ExternalEmbeddingCase(privacy::NeighbouringRelation relation, bool charfn);
// release::MarginalsKind over cliques {0}, {1}, {0, 1} (MST's 1-way and 2-way
// measurements in one release).
AuditCase MarginalsCase(privacy::NeighbouringRelation relation, const Mutation& mutation = {});
// privacy::ExponentialMechanismSelect at MST's quality sensitivity.
AuditCase ExponentialMechanismCase(privacy::NeighbouringRelation relation,
                                   const Mutation& mutation = {});
// ldp::LdpMechanism, Laplace l1 and Gaussian l2.
AuditCase LdpLaplaceCase(const Mutation& mutation = {});
AuditCase LdpGaussianCase(const Mutation& mutation = {});

// Every case above, unmutated, under each relation.
std::vector<AuditCase> OneShotCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_ONE_SHOT_CASES_H_
