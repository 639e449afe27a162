#ifndef DPCURATOR_PLAN_FOOTPRINT_H_
#define DPCURATOR_PLAN_FOOTPRINT_H_

// What a planned release or step will hold and send (issue 36), projected
// from public parameters by the plan code; the server's memory budget
// (server/memory_budget.h) and send limit decide on it before admission.

#include <cstdint>
#include <string>

namespace dpcurator::plan {

// a * b and a + b of non-negative byte counts, saturating at INT64_MAX: a
// projection from hostile parameters (max_model_cells = 2^62) stays a
// number that is over any budget, never a wrapped-around small one.
int64_t SaturatingMul(int64_t a, int64_t b);
int64_t SaturatingAdd(int64_t a, int64_t b);

// What one release or session step will hold at its peak and send,
// projected before admission by the code that plans it (PlanRelease,
// PlanMarginalsRelease, SessionStepFootprint in plan/releases.h).
struct PlanFootprint {
  // From the request's public parameters and the public schema: the model,
  // tables, frequency matrices, step buffers and the artefact's copies.
  int64_t public_bytes = 0;
  // The dataset's rows as the work holds them (n x d raw, encoded, the
  // batch): private under ADD_REMOVE, so never named in a reply.
  int64_t row_bytes = 0;
  // An upper bound on the serialized answer (the Release or step answer,
  // stored and sent as one message); public.
  int64_t artefact_bytes = 0;
  // An external dataset's statistic as its runner submits it (one message,
  // received under the same limit; issue 41's tables can be large): 0 when
  // nothing is submitted by message size that matters (embeddings: small).
  int64_t submitted_bytes = 0;
  // For messages: what it is ("aim release") and which parameter lowers it.
  std::string what;
  std::string hint;
};

}  // namespace dpcurator::plan

#endif  // DPCURATOR_PLAN_FOOTPRINT_H_
