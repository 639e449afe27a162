#ifndef DPCURATOR_SERVER_RELEASES_H_
#define DPCURATOR_SERVER_RELEASES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/data/schema.h"
#include "core/privacy/events.h"
#include "core/privacy/noise_source.h"
#include "core/release/encoded_rows.h"
#include "core/release/mechanism_record.h"
#include "dpcurator/v1/dpcurator.pb.h"
#include "server/release_kinds.h"

namespace dpcurator::server {

// What a release request will cost, decided before any row is read.
struct ReleasePlan {
  const ReleaseKindBinding* binding = nullptr;
  // The kind's one name (ReleaseKindName), as the ledger, log and metrics
  // record it.
  std::string kind_name() const;
  double noise_multiplier = 0.0;
  // The mechanism the kind's unit will run, and the event charged for it:
  // release::OneShotEvent(planned), built nowhere else.
  release::GaussianMechanismRecord planned;
  std::optional<privacy::PrivacyEvent> event;
  // The request with server-chosen defaults filled in (public seed, ...):
  // stored with the release, so a replay is exact.
  v1::ReleaseRequest resolved_request;
};

// Validates the request against the dataset, resolves defaults and
// calibrates the noise multiplier for a target epsilon (conservatively, at
// the dataset's delta, for this release alone).
absl::StatusOr<ReleasePlan> PlanRelease(const v1::ReleaseRequest& request,
                                        const v1::Dataset& dataset, const data::Schema& schema);

// Runs the kind's engine for the planned release over the dataset's
// encoded rows and wraps the noised statistic in an artefact. Refuses
// (INTERNAL, nothing released) when the engine's record of its mechanism
// differs from the plan the ledger charged. Pure computation: no ledger.
absl::StatusOr<v1::Release> ComputeRelease(const ReleasePlan& plan, const v1::Dataset& dataset,
                                           const release::EncodedRows& rows,
                                           const std::string& release_id, double epsilon_alone,
                                           privacy::NoiseSource* noise);

// A session's per-step mechanism, decided at open: Poisson-subsampled
// Gaussian (ADD_REMOVE) or fixed-size sampling without replacement
// (REPLACE_ONE), T of them reserved.
struct SessionPlan {
  std::optional<privacy::PrivacyEvent> step_event;
  double noise_multiplier = 0.0;
  int64_t steps = 0;
  v1::SessionParams resolved_params;
};
absl::StatusOr<SessionPlan> PlanSession(const v1::OpenSessionRequest& request,
                                        const v1::Dataset& dataset);

// Before any row is read: the step request's query fits the session's step
// kind (INVALID_ARGUMENT otherwise).
absl::Status CheckStepQuery(const v1::SessionParams& params,
                            const v1::SessionStepRequest& request);

// One step: draws the subsample with the noise source's randomness (it is
// part of the mechanism), then computes the step kind's noisy statistic of
// the batch (rff_embedding: the batch's labelled embedding with the
// Gaussian noise of the plan). Returns the answer's bytes, as stored.
absl::StatusOr<std::string> ComputeSessionStep(const v1::Session& session,
                                               const v1::Dataset& dataset,
                                               const release::EncodedRows& rows,
                                               const std::string& step_id,
                                               privacy::NoiseSource* noise);


// Puts a stored answer into the response's case for the session's kind.
absl::Status SetStepAnswer(const v1::SessionParams& params, const std::string& answer,
                           v1::SessionStepResponse* response);

}  // namespace dpcurator::server

#endif  // DPCURATOR_SERVER_RELEASES_H_
