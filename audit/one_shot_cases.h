#ifndef DPCURATOR_AUDIT_ONE_SHOT_CASES_H_
#define DPCURATOR_AUDIT_ONE_SHOT_CASES_H_

// The one-shot release kinds' audit cases (issue 23 item 1; issue 37 items
// 1-2): rff and charfn embeddings, an image-schema rff release, the
// external path, and the marginals MST measures, each under every relation
// it is defined for, each built by the server's own plan code on an
// in-memory dataset (audit/plan_fixture.h): the v1 request at the target
// epsilon, plan::PlanRelease on the dataset's record, the charge of
// plan.event through the accountant, and per run the plan's compute
// function (ComputeRelease, ComputeReleaseFromStatistic,
// ComputeMarginalsRelease), read back from the artefact, on a tiny
// worst-case pair (docs/privacy.md 7.1). No case calibrates or builds an
// event. The exponential mechanism MST selects with and the two local-DP
// device mechanisms are primitives (no server plan runs them alone) and
// are audited as such.

#include <vector>

#include "audit/audit_case.h"
#include "core/privacy/relation.h"

namespace dpcurator::audit {

// A planted bug, for the audit's power tests only (audit/mutants.h;
// never reachable from a shipped binary's flags). The default is the
// shipped code exactly. A plan-level mutation edits the plan after the plan
// function returns and keeps the event it computed, so the mutant is "a
// plan whose mechanism and charge disagree" (issue 37 item 2).
struct Mutation {
  // The plan's multiplier times this, the record re-planned for it, the
  // event of s charged (1/2: "sigma halved").
  double noise_multiplier_factor = 1.0;
  // The engine's noise step (ComputeReleaseFromStatistic) over sums of
  // features of this norm, as if the norm clamp were missing (2: the
  // canary's contribution, and so the sensitivity, doubles).
  double feature_norm = 1.0;
  // A REPLACE_ONE plan (and its event charged), run with the dataset's
  // relation flipped to ADD_REMOVE (noisy sums and counts, sensitivity
  // sqrt 2, on a pair that differs by a replacement).
  bool run_as_add_remove = false;
  // A partitioned plan's event replaced by one part's add/remove event
  // (partition_cases.h; the multiplier kept): a row that changes parts
  // under REPLACE_ONE charged as one part's neighbour.
  bool charge_one_part = false;
  // Exponential mechanism: the declared sensitivity times this.
  double sensitivity_factor = 1.0;
  // LDP: the records sit at this multiple of the radius and are not
  // projected ("radius not enforced").
  double ldp_record_scale = 1.0;
  // Category fit: the plan's threshold tau times this (rounded down, at
  // least 2), its event (of the calibrated tau) charged: a value only one
  // row has is published far more often than delta_0.
  double fit_threshold_factor = 1.0;
};

// rff_embedding (ReleaseRequest.rff_embedding) on a numeric schema, or on a
// 2 x 2 image schema when `image`: PlanRelease, then PrepareRelease and
// ComputeRelease per run.
AuditCase RffEmbeddingCase(privacy::NeighbouringRelation relation, bool image,
                           const Mutation& mutation = {});
// charfn_embedding with a declared length-scale, likewise.
AuditCase CharfnEmbeddingCase(privacy::NeighbouringRelation relation,
                              const Mutation& mutation = {});
// The external path (issue 28; docs/scale-out.md "External datasets"): an
// external dataset's record (public_row_bound the public n under
// REPLACE_ONE), PlanRelease, and per run PrepareRelease and
// ComputeReleaseFromStatistic (RunnerService.SubmitStatistic's step) over
// each side's exact statistic computed as the curator's partials compute
// it (release::ExactLabelledEmbedding, in the partials' layout).
// rff_embedding, or charfn_embedding with a declared length-scale when
// `charfn`.
AuditCase ExternalEmbeddingCase(privacy::NeighbouringRelation relation, bool charfn);
// A marginals release (ReleaseRequest.marginals) of cliques {0}, {1},
// {0, 1} (MST's 1-way and 2-way measurements in one release): PlanRelease
// (PlanMarginalsRelease) and ComputeMarginalsRelease.
// fit_grid (issue 38): the bin-fit release, i.e. the same release of one
// numeric column's 1-way table over release::FitGridSchema.
AuditCase MarginalsCase(privacy::NeighbouringRelation relation, bool fit_grid = false);
// category_fit (ReleaseRequest.category_fit; issue 38, docs/privacy.md
// 2.11.2) on an open column: PlanRelease, then ComputeCategoryFitRelease
// per run over the column's values (a dictionary and indices, as
// Store::LoadOpenColumn gives them). D0 holds a common value tau times (the
// planned threshold: published about half the time); D1 adds a row of a
// canary value (ADD_REMOVE) or replaces one common row by it (REPLACE_ONE:
// the common count moves down by 1 too). The score: 2 x [canary published]
// + [common not published], larger on D1.
AuditCase CategoryFitCase(privacy::NeighbouringRelation relation,
                          const Mutation& mutation = {});
// Primitive: privacy::ExponentialMechanismSelect at MST's quality
// sensitivity (MST's recipe runs it inside ComputeMstRelease).
AuditCase ExponentialMechanismCase(privacy::NeighbouringRelation relation,
                                   const Mutation& mutation = {});
// Primitive: ldp::LdpMechanism, Laplace l1 and Gaussian l2 (run on the
// devices, not by a server plan).
AuditCase LdpLaplaceCase(const Mutation& mutation = {});
AuditCase LdpGaussianCase(const Mutation& mutation = {});

// Every case above, unmutated, under each relation.
std::vector<AuditCase> OneShotCases();

}  // namespace dpcurator::audit

#endif  // DPCURATOR_AUDIT_ONE_SHOT_CASES_H_
